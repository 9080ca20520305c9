//! [`Controller::discover`]: discovery that marks the devices the configuration already has, by MAC when
//! both sides know it, else by address (or host name) and port.

use super::found::{Configured, Discovered, normalise_mac};
use super::{DiscoverOptions, discover_in};
use crate::controller::Controller;
use crate::error::Result;
use crate::objects::Device;
use std::time::Duration;

impl Controller {
    /// [`discover`](crate::discover) with each result's `Configured` set: `false`, or the name of the configured
    /// device it is. A device is matched by MAC when its snapshot has one (learned at the first contact), else
    /// by host (address, or mDNS host name with or without `.local`) and port. Uses the controller's model
    /// library. Listens for `timeout`, then confirms (see [`DiscoverOptions::timeout`]).
    pub fn discover(&self, timeout: Duration) -> Result<Vec<Discovered>> {
        self.discover_with(&DiscoverOptions::new(timeout))
    }

    /// [`Controller::discover`] with options (which interfaces).
    pub fn discover_with(&self, options: &DiscoverOptions) -> Result<Vec<Discovered>> {
        let mut found = discover_in(options, &self.settings().models)?;
        mark_configured(&mut found, &self.devices());
        Ok(found)
    }
}

/// Sets `configured` on every result against the configured devices' snapshots.
pub(crate) fn mark_configured(found: &mut [Discovered], devices: &[Device]) {
    for d in found {
        let by_mac = d.mac_address.as_deref().and_then(|mac| {
            devices.iter().find(|dev| {
                dev.mac_address
                    .as_deref()
                    .and_then(normalise_mac)
                    .as_deref()
                    == Some(mac)
            })
        });
        // A device whose MAC is known on both sides and differs is another device at a reused address.
        let by_host = || {
            devices.iter().find(|dev| {
                (dev.mac_address.is_none() || d.mac_address.is_none())
                    && dev.port == d.port
                    && dev.hostname.as_deref().is_some_and(|h| {
                        let h = h.trim_end_matches('.');
                        h == d.address.to_string()
                            || h.trim_end_matches(".local")
                                .eq_ignore_ascii_case(&d.hostname)
                    })
            })
        };
        d.configured = Some(match by_mac.or_else(by_host) {
            Some(dev) => Configured::As(dev.name.clone()),
            None => Configured::No,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(mac: Option<&str>, address: &str, port: u16, hostname: &str) -> Discovered {
        Discovered {
            mac_address: mac.map(str::to_string),
            model: None,
            reported_model: None,
            generation: None,
            address: address.parse().unwrap(),
            port,
            name: "x".into(),
            hostname: hostname.into(),
            firmware: None,
            auth_required: None,
            cert_sha256: None,
            configured: None,
        }
    }

    fn device(name: &str, mac: Option<&str>, host: &str, port: u16) -> Device {
        Device {
            name: name.into(),
            mac_address: mac.map(str::to_string),
            hostname: Some(host.into()),
            port,
            ..Default::default()
        }
    }

    #[test]
    fn configured_devices_are_matched_by_mac_then_by_host_and_port() {
        let devices = [
            // Moved to another address since: the MAC it reported still matches.
            device("Kitchen", Some("a8032ab12345"), "192.168.1.99", 80),
            device("Cellar", None, "192.168.1.30", 80),
            device("Garage", None, "shelly1pm-F4128C.local", 80),
            device("Lab", None, "192.168.1.40", 8080),
            device("Porch", Some("020000000002"), "192.168.1.50", 80),
        ];
        let mut results = [
            found(
                Some("A8:03:2A:B1:23:45"),
                "192.168.1.20",
                80,
                "ShellyPlus1PM-A8032AB12345",
            ),
            found(Some("00:00:00:00:00:01"), "192.168.1.30", 80, "a"),
            found(None, "192.168.1.31", 80, "shelly1pm-f4128c"),
            found(None, "192.168.1.40", 80, "b"),
            // Porch's old address, now another device's.
            found(Some("02:00:00:00:00:03"), "192.168.1.50", 80, "c"),
        ];
        mark_configured(&mut results, &devices);
        let marks: Vec<_> = results
            .iter()
            .map(|d| d.configured.clone().unwrap())
            .collect();
        assert_eq!(
            marks,
            [
                Configured::As("Kitchen".into()),
                Configured::As("Cellar".into()),
                Configured::As("Garage".into()),
                Configured::No,
                Configured::No,
            ]
        );
    }
}
