//! The controller's side of the outbound WebSocket server (`webhook/outbound_ws.rs`): which configured device
//! a connecting device is, and its notifications handed to the push channel's code (`push::notify_outbound`),
//! so they update the snapshot and queue events exactly as pushed ones do.
//!
//! Identity: a frame's `src` is the device id (`shellyhtg3-aabbccddeeff`), whose last part is the MAC. It must
//! be the MAC of a device reporting here (its configured `MAC`, else the one it reported at a contact), and a
//! full status's `sys.mac` must say the same; the source address counts for nothing (NAT, DHCP). A device
//! that is not configured is logged once per id (at most [`MAX_LOGGED`] ids remembered) and dropped.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::push::{self, Context, Target};
use crate::driver::ws::rpc::parse_notification;
use crate::mac::Mac;

/// Device ids remembered as already logged; beyond this, unknown devices are logged at DEBUG only.
pub(crate) const MAX_LOGGED: usize = 1024;

/// The devices that report through the outbound WebSocket.
pub(crate) struct Outbound {
    /// One per device reporting here; shares the device's tunnel (mirror) with its driver.
    targets: Vec<Target>,
    /// Each target's configured MAC.
    macs: Vec<Option<Mac>>,
    ctx: Arc<Context>,
    /// Ids already logged as unknown or refused.
    logged: Mutex<HashSet<String>>,
}

impl Outbound {
    /// `macs`: each target's configured `MAC`, in the same order.
    pub(crate) fn new(targets: Vec<Target>, macs: Vec<Option<Mac>>, ctx: Arc<Context>) -> Outbound {
        Outbound {
            targets,
            macs,
            ctx,
            logged: Mutex::new(HashSet::new()),
        }
    }

    /// The MAC device `i` is known by: configured, else reported at a contact.
    fn mac_of(&self, i: usize) -> Option<Mac> {
        self.macs[i].or_else(|| {
            let slot = self.ctx.shared.slots.get(self.targets[i].di)?;
            let snap = super::worker::snapshot(slot);
            Mac::parse(snap.mac_address.as_deref()?).ok()
        })
    }

    /// Logs at WARN once per id (bounded), at DEBUG after that.
    fn once(&self, id: &str, text: String) {
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged.len() < MAX_LOGGED && logged.insert(id.to_string()) {
            log::warn!("{text}");
        } else {
            log::debug!("{text}");
        }
    }
}

/// The MAC in a device id: its last `-` part, 12 hex digits.
fn mac_in_id(src: &str) -> Option<Mac> {
    let tail = src.rsplit('-').next()?;
    (tail.len() == 12 && tail.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| Mac::parse(tail).ok())
        .flatten()
}

impl crate::webhook::WsSink for Outbound {
    fn identify(&self, frame: &Map<String, Value>, source: IpAddr) -> Option<usize> {
        let src = frame.get("src").and_then(Value::as_str).unwrap_or_default();
        let shown = crate::text::quote(src, 80);
        let Some(mac) = mac_in_id(src) else {
            self.once(
                src,
                format!(
                    "outbound WebSocket: a device at {source} calls itself {shown}, which names no MAC; dropped"
                ),
            );
            return None;
        };
        let Some(i) = (0..self.targets.len()).find(|&i| self.mac_of(i) == Some(mac)) else {
            self.once(
                src,
                format!(
                    "outbound WebSocket: device {shown} ({mac}) at {source} is not configured to report here (give it MAC: {mac} in the configuration); dropped"
                ),
            );
            return None;
        };
        if let Some(reported) = frame
            .get("params")
            .and_then(|p| p.pointer("/sys/mac"))
            .and_then(Value::as_str)
            && Mac::parse(reported).ok() != Some(mac)
        {
            self.once(
                src,
                format!(
                    "outbound WebSocket: device {shown} at {source} reports MAC {}, not the {mac} of its id: not device {}; refused",
                    crate::text::quote(reported, 40),
                    self.targets[i].label
                ),
            );
            return None;
        }
        Some(i)
    }

    fn deliver(&self, device: usize, frame: Map<String, Value>, source: IpAddr) {
        let (Some(t), Some(n)) = (self.targets.get(device), parse_notification(&frame)) else {
            return;
        };
        if t.tunnel.live() {
            // A mains device with its push channel up sends the same notifications there: taken once.
            return;
        }
        push::notify_outbound(t, &self.ctx, n, source);
    }
}

#[cfg(test)]
mod tests {
    use super::mac_in_id;

    #[test]
    fn the_mac_is_the_last_part_of_the_device_id() {
        let m = mac_in_id("shellyhtg3-543204539b34").unwrap();
        assert_eq!(m.to_string(), "54:32:04:53:9B:34");
        assert!(mac_in_id("shellyhtg3-54320453").is_none());
        assert!(mac_in_id("shellyhtg3-54320453zz34").is_none());
        assert!(mac_in_id("").is_none());
    }
}
