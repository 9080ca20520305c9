//! `sd-find`: follows devices configured with a `MAC` that do not answer at their address. Once a second it
//! looks at the published snapshots (no I/O): a device with a configured MAC that is offline (or has no
//! address yet) is missing. When some are and the last lookup began a minute ago or more (or never), one
//! lookup ([`Finder`]: an mDNS browse by default) serves every missing device at once; its results also serve
//! a device that goes missing before the next lookup (the other half of a swap), with no new lookup. A result with a missing
//! device's MAC at another address becomes a [`Command::Moved`] to its worker, which checks the MAC there
//! before it moves (the address is a hint). Devices without a configured MAC are never moved.
//!
//! Nothing waits on this thread: workers and the supervisor never do, and `close` sets the stop flag (the
//! default finder's browse looks at it every 50 ms), waits briefly, and leaves a thread still confirming
//! candidates to end on its own (its moves go nowhere: the workers' senders are gone).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::restart::Now;
use super::worker::{Command, snapshot};
use crate::discovery::{Discovered, Finder, Lookup};
use crate::mac::Mac;
use crate::objects::Device;
use crate::webhook::routing::Shared;

/// At most one lookup begins per this time, whatever the number of missing devices.
pub(crate) const MIN_GAP: Duration = Duration::from_secs(60);
/// How often the snapshots are looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long `close` waits for a lookup to notice the stop flag before leaving the thread to end on its own.
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// One device that does not answer at its address.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Missing {
    /// Index in configuration order.
    pub di: usize,
    /// Its configured MAC.
    pub mac: Mac,
    /// Where it was last (host, port), if anywhere.
    pub at: Option<(String, u16)>,
}

/// The devices to look for: configured with a MAC, not simulated, and offline (or never addressed).
pub(crate) fn missing(devices: &[Arc<Device>], macs: &[Option<Mac>]) -> Vec<Missing> {
    devices
        .iter()
        .zip(macs)
        .enumerate()
        .filter_map(|(di, (d, mac))| {
            let mac = (*mac)?;
            (!d.simulate && !d.online).then(|| Missing {
                di,
                mac,
                at: d.address.clone().map(|h| (h, d.port)),
            })
        })
        .collect()
}

/// The moves a lookup's results ask for: each missing device whose MAC was found at another address, once
/// (a MAC seen at two addresses is ambiguous: not moved).
pub(crate) fn moves(missing: &[Missing], found: &[Discovered]) -> Vec<(usize, String, u16)> {
    missing
        .iter()
        .filter_map(|m| {
            let mut at = found.iter().filter(|d| {
                d.mac_address
                    .as_deref()
                    .and_then(|s| Mac::parse(s).ok())
                    .is_some_and(|seen| seen == m.mac)
            });
            let first = at.next()?;
            if at.any(|d| d.address != first.address || d.port != first.port) {
                log::warn!(
                    "{} answers at more than one address: not followed (two devices with one MAC?)",
                    m.mac
                );
                return None;
            }
            let host = first.address.to_string();
            let same =
                m.at.as_ref()
                    .is_some_and(|(h, p)| *h == host && *p == first.port);
            (!same).then_some((m.di, host, first.port))
        })
        .collect()
}

/// When lookups may begin: one per [`MIN_GAP`], shared by every device.
pub(crate) struct Schedule {
    now: Now,
    last: Option<Instant>,
}

impl Schedule {
    pub(crate) fn new(now: Now) -> Self {
        Schedule { now, last: None }
    }

    /// Whether a lookup may begin now; if so, it counts as begun.
    pub(crate) fn begin(&mut self) -> bool {
        let now = (self.now)();
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < MIN_GAP)
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}

/// The running `sd-find` thread.
pub(crate) struct Find {
    stop: Arc<AtomicBool>,
    stop_tx: Option<Sender<()>>,
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Find {
    /// Starts `sd-find` for the devices of `shared` (`macs`: each one's configured MAC, by configuration index).
    pub(crate) fn start(
        shared: Arc<Shared>,
        macs: Vec<Option<Mac>>,
        mut finder: Box<dyn Finder>,
        now: Now,
    ) -> std::io::Result<Find> {
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
        let flag = stop.clone();
        let builder = std::thread::Builder::new()
            .name("sd-find".into())
            .stack_size(256 * 1024);
        let thread = crate::log_scope::spawn(builder, move || {
            let _done = done_tx;
            let mut schedule = Schedule::new(now);
            // The last lookup's results serve a device that goes missing before the next one (the other half
            // of a swap); each hint is sent once.
            let mut seen: Vec<Discovered> = Vec::new();
            let mut hinted: Vec<(usize, String, u16)> = Vec::new();
            loop {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let devices: Vec<Arc<Device>> = shared.slots.iter().map(snapshot).collect();
                let lost = missing(&devices, &macs);
                allow_moved(&shared, &devices, &macs);
                drop(devices);
                if !lost.is_empty() {
                    if schedule.begin() {
                        seen = lookup(&lost, &mut *finder, &flag);
                        hinted.clear();
                    }
                    for hint in moves(&lost, &seen) {
                        if flag.load(Ordering::SeqCst) || hinted.contains(&hint) {
                            continue;
                        }
                        hinted.push(hint.clone());
                        if !send_move(&shared, hint) {
                            break;
                        }
                    }
                }
                match stop_rx.recv_timeout(CHECK_EVERY) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            }
        })?;
        Ok(Find {
            stop,
            stop_tx: Some(stop_tx),
            done,
            thread: Some(thread),
        })
    }

    /// Stops the thread: joined when it ends within [`CLOSE_WAIT`] (a lookup sees the flag within 50 ms),
    /// else left to end on its own.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        drop(self.stop_tx.take());
        let ended = matches!(
            self.done.recv_timeout(CLOSE_WAIT),
            Err(RecvTimeoutError::Disconnected)
        );
        if let Some(t) = self.thread.take()
            && ended
        {
            let _ = t.join();
        }
    }
}

impl Drop for Find {
    fn drop(&mut self) {
        self.stop();
    }
}

/// With `AllowedSources: devices`: the address of a device that moved is allowed to send webhooks once the
/// device is online there (its MAC confirmed).
fn allow_moved(shared: &Shared, devices: &[Arc<Device>], macs: &[Option<Mac>]) {
    let Some(allowed) = &shared.allowed else {
        return;
    };
    for (d, _) in devices
        .iter()
        .zip(macs)
        .filter(|(d, m)| m.is_some() && d.online)
    {
        let Some(ip) = d
            .address
            .as_deref()
            .and_then(|h| h.trim_matches(['[', ']']).parse::<std::net::IpAddr>().ok())
        else {
            continue;
        };
        if !allowed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&ip)
        {
            allowed.write().unwrap_or_else(|e| e.into_inner()).push(ip);
        }
    }
}

/// One lookup for the `lost` devices (nothing when it failed: logged).
fn lookup(lost: &[Missing], finder: &mut dyn Finder, stop: &Arc<AtomicBool>) -> Vec<Discovered> {
    let macs: Vec<String> = lost.iter().map(|m| m.mac.to_string()).collect();
    log::debug!("looking for {} by discovery", macs.join(", "));
    let request = Lookup::new(macs, stop.clone());
    let found =
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| finder.find(&request))) {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => {
                log::warn!(
                    "looking for devices that moved failed: {}; trying again in {} s",
                    e.reason(),
                    MIN_GAP.as_secs()
                );
                return Vec::new();
            }
            Err(p) => {
                log::error!(
                    "looking for devices that moved panicked: {}; trying again in {} s",
                    super::worker::panic_message(&*p),
                    MIN_GAP.as_secs()
                );
                return Vec::new();
            }
        };
    log::debug!("discovery found {} device(s)", found.len());
    found
}

/// Sends a move hint to device `di`'s worker; false once the controller is closing.
fn send_move(shared: &Shared, (di, host, port): (usize, String, u16)) -> bool {
    // The senders are taken at each use, never kept: `close` ends the workers by dropping them.
    let tx = {
        let guard = shared.senders.read().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref().and_then(|s| s.get(di).cloned()) {
            Some(tx) => tx,
            None => return false,
        }
    };
    tx.send(Command::Moved { host, port }).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(mac: &str, ip: &str, port: u16) -> Discovered {
        Discovered {
            mac_address: Some(mac.into()),
            model: None,
            reported_model: None,
            generation: Some(2),
            address: ip.parse().unwrap(),
            port,
            name: "x".into(),
            hostname: "x".into(),
            firmware: None,
            auth_required: None,
            cert_sha256: None,
            configured: None,
        }
    }

    fn dev(online: bool, address: Option<&str>) -> Arc<Device> {
        Arc::new(Device {
            online,
            address: address.map(str::to_string),
            port: 80,
            ..Device::default()
        })
    }

    fn mac(s: &str) -> Mac {
        Mac::parse(s).unwrap()
    }

    #[test]
    fn only_offline_devices_with_a_configured_mac_are_missing() {
        let devices = [
            dev(false, Some("10.0.0.5")),
            dev(true, Some("10.0.0.6")),
            dev(false, Some("10.0.0.7")),
            dev(false, None),
        ];
        let macs = [
            Some(mac("A8:03:2A:B1:23:45")),
            Some(mac("A8:03:2A:B1:23:46")),
            None,
            Some(mac("A8:03:2A:B1:23:47")),
        ];
        let m = missing(&devices, &macs);
        let idx: Vec<usize> = m.iter().map(|m| m.di).collect();
        assert_eq!(idx, [0, 3], "online, and no configured MAC: not looked for");
        assert_eq!(m[0].at, Some(("10.0.0.5".into(), 80)));
        assert_eq!(m[1].at, None);
    }

    #[test]
    fn a_swap_moves_both_and_a_device_found_where_it_is_or_nowhere_does_not_move() {
        let lost = [
            Missing {
                di: 0,
                mac: mac("AA:00:00:00:00:01"),
                at: Some(("10.0.0.5".into(), 80)),
            },
            Missing {
                di: 1,
                mac: mac("AA:00:00:00:00:02"),
                at: Some(("10.0.0.9".into(), 80)),
            },
            Missing {
                di: 2,
                mac: mac("AA:00:00:00:00:03"),
                at: Some(("10.0.0.3".into(), 80)),
            },
            Missing {
                di: 3,
                mac: mac("AA:00:00:00:00:04"),
                at: None,
            },
        ];
        let seen = [
            found("aa-00-00-00-00-01", "10.0.0.9", 80),
            found("AA:00:00:00:00:02", "10.0.0.5", 80),
            found("AA:00:00:00:00:03", "10.0.0.3", 80),
            found("11:22:33:44:55:66", "10.0.0.4", 80),
        ];
        assert_eq!(
            moves(&lost, &seen),
            [(0, "10.0.0.9".into(), 80), (1, "10.0.0.5".into(), 80)]
        );
    }

    #[test]
    fn a_mac_at_two_addresses_is_not_followed() {
        let lost = [Missing {
            di: 0,
            mac: mac("AA:00:00:00:00:01"),
            at: None,
        }];
        let seen = [
            found("AA:00:00:00:00:01", "10.0.0.9", 80),
            found("AA:00:00:00:00:01", "10.0.0.10", 80),
        ];
        assert!(moves(&lost, &seen).is_empty());
        // The same device twice (two services) is one.
        let seen = [
            found("AA:00:00:00:00:01", "10.0.0.9", 80),
            found("AA:00:00:00:00:01", "10.0.0.9", 80),
        ];
        assert_eq!(moves(&lost, &seen), [(0, "10.0.0.9".into(), 80)]);
    }

    #[test]
    fn one_lookup_a_minute_at_most_whoever_is_missing() {
        let (now, clock) = crate::actor::restart::tests::manual();
        let mut s = Schedule::new(now);
        assert!(s.begin(), "the first lookup begins at once");
        assert!(!s.begin());
        *clock.lock().unwrap() += MIN_GAP - Duration::from_millis(1);
        assert!(!s.begin(), "59.999 s later: not yet");
        *clock.lock().unwrap() += Duration::from_millis(1);
        assert!(s.begin(), "a minute later");
        assert!(!s.begin());
    }
}
