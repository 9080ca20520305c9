//! Which network interfaces mDNS may use. By default only those with an address in a private range
//! (10/8, 172.16/12, 192.168/16, IPv6 fc00::/7) or a link-local one (169.254/16, fe80::/10): a host on a public
//! network, a VPN with public addresses or a cloud VM's public interface gets no multicast from us.

use std::net::IpAddr;

/// Where mDNS queries and announcements go.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Interfaces {
    /// Interfaces with a private or link-local address (the default).
    #[default]
    Private,
    /// Only the interfaces with these names (`eth0`, `wlan0`), whatever their addresses.
    Named(Vec<String>),
    /// Every interface with multicast, loopback included (for tests inside a network namespace).
    All,
}

/// Whether `ip` is in a private or link-local range.
pub fn is_private_or_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            (first & 0xffc0) == 0xfe80 || (first & 0xfe00) == 0xfc00
        }
    }
}

/// Applies the selection to a daemon (mdns-sd enables every interface unless told otherwise).
pub(crate) fn apply(daemon: &mdns_sd::ServiceDaemon, which: &Interfaces) -> mdns_sd::Result<()> {
    use mdns_sd::{IfKind, IfPredicate};
    match which {
        Interfaces::All => Ok(()),
        Interfaces::Private => {
            daemon.disable_interface(IfKind::All)?;
            daemon.enable_interface(IfKind::Predicate(IfPredicate::new(|intf| {
                is_private_or_link_local(intf.ip())
            })))
        }
        Interfaces::Named(names) => {
            daemon.disable_interface(IfKind::All)?;
            daemon.enable_interface(
                names
                    .iter()
                    .map(|n| IfKind::Name(n.clone()))
                    .collect::<Vec<_>>(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_link_local_ranges() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.1",
            "192.168.1.20",
            "169.254.3.4",
            "fe80::1",
            "fd00::1",
        ] {
            assert!(is_private_or_link_local(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "172.32.0.1",
            "127.0.0.1",
            "2001:db8::1",
            "::1",
            "100.64.0.1",
        ] {
            assert!(!is_private_or_link_local(ip.parse().unwrap()), "{ip}");
        }
    }
}
