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
    /// library. Listens for `timeout`, plus at most [`CONFIRM_TIMEOUT`](super::CONFIRM_TIMEOUT).
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
        let by_host = || {
            devices.iter().find(|dev| {
                dev.port == d.port
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
