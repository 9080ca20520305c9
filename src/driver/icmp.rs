//! ICMP echo, where this process may send one (unprivileged datagram sockets, or raw sockets as root).
//! When neither is allowed the probe says so once and callers fall back to an HTTP probe; an unavailable
//! ICMP never marks a device offline.

use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

/// The outcome of one echo.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Echo {
    /// The host answered.
    Reply,
    /// No answer within the timeout (or the host is unreachable).
    NoReply,
    /// This process may not send ICMP, or the name does not resolve; decide by other means.
    Unavailable,
}

static UNAVAILABLE_LOGGED: OnceLock<()> = OnceLock::new();
static SEQUENCE: AtomicU16 = AtomicU16::new(1);

fn open(v6: bool) -> Option<(Socket, bool)> {
    let (domain, proto) = if v6 {
        (Domain::IPV6, Protocol::ICMPV6)
    } else {
        (Domain::IPV4, Protocol::ICMPV4)
    };
    // Datagram first (no privileges needed where ping_group_range allows), then raw (root / CAP_NET_RAW).
    if let Ok(s) = Socket::new(domain, Type::DGRAM, Some(proto)) {
        return Some((s, false));
    }
    Socket::new(domain, Type::RAW, Some(proto))
        .ok()
        .map(|s| (s, true))
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Sends one echo request to `host` and waits up to `timeout` for the reply (less when `stop` is set).
pub(crate) fn ping(host: &str, timeout: Duration, stop: &AtomicBool) -> Echo {
    let addr: Option<IpAddr> = (host.trim_matches(['[', ']']), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip());
    let Some(ip) = addr else {
        return Echo::Unavailable;
    };
    let Some((sock, raw)) = open(ip.is_ipv6()) else {
        UNAVAILABLE_LOGGED.get_or_init(|| {
            log::info!(
                "ICMP echo is not permitted for this process; liveness uses HTTP probes instead"
            );
        });
        return Echo::Unavailable;
    };
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let ident = std::process::id() as u16;
    let (req_type, reply_type) = if ip.is_ipv6() {
        (128u8, 129u8)
    } else {
        (8u8, 0u8)
    };
    let mut packet = vec![req_type, 0, 0, 0];
    packet.extend_from_slice(&ident.to_be_bytes());
    packet.extend_from_slice(&seq.to_be_bytes());
    packet.extend_from_slice(b"smartdev-liveness");
    if !ip.is_ipv6() {
        let c = checksum(&packet);
        packet[2..4].copy_from_slice(&c.to_be_bytes());
    }
    if sock
        .send_to(&packet, &SocketAddr::new(ip, 0).into())
        .is_err()
    {
        return Echo::NoReply;
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 1500];
    let mut reader = &sock;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stop.load(Ordering::Relaxed) {
            return Echo::NoReply;
        }
        // Short slices, so closing the controller is not held up by a silent host.
        if sock
            .set_read_timeout(Some(left.min(Duration::from_millis(100))))
            .is_err()
        {
            return Echo::NoReply;
        }
        let n = match reader.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return Echo::NoReply,
        };
        // Raw IPv4 sockets deliver the IP header first.
        let start = if raw && !ip.is_ipv6() {
            usize::from(buf[0] & 0x0f) * 4
        } else {
            0
        };
        let Some(icmp) = buf.get(start..n) else {
            continue;
        };
        // Datagram sockets rewrite the identifier, so match type and sequence only.
        if icmp.len() >= 8 && icmp[0] == reply_type && icmp[6..8] == seq.to_be_bytes() {
            return Echo::Reply;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_the_rfc_example() {
        // RFC 1071: the checksum of a buffer including its own checksum is 0.
        let mut p = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, b'a', b'b', b'c'];
        let c = checksum(&p);
        p[2..4].copy_from_slice(&c.to_be_bytes());
        assert_eq!(checksum(&p), 0);
    }

    #[test]
    fn loopback_answers_or_icmp_is_reported_unavailable() {
        let stop = AtomicBool::new(false);
        let r = ping("127.0.0.1", Duration::from_secs(1), &stop);
        assert!(matches!(r, Echo::Reply | Echo::Unavailable), "{r:?}");
        assert_eq!(
            ping("no-such-host.invalid", Duration::from_millis(100), &stop),
            Echo::Unavailable
        );
    }
}
