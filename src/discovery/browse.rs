//! Browsing: one mdns-sd daemon (its own thread, started here and shut down before returning) asks for
//! `_shelly._tcp` and `_http._tcp` for the given time and collects what resolves into [`Announcement`]s.

use super::candidate::{Announcement, HTTP_SERVICE, SHELLY_SERVICE};
use super::interfaces::{Interfaces, apply};
use crate::error::{Error, Result};
use mdns_sd::{ServiceDaemon, ServiceEvent};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Resolved services kept at most; a network that announces more is hostile or huge.
const MAX_ANNOUNCEMENTS: usize = 1024;

/// Every announcement of the two services heard within `timeout` (or until `stop` is set: it is looked at
/// every 50 ms, so a closing controller does not wait for a browse). Each batch of new announcements goes to
/// `enough` as it resolves; the browse ends early when that says so (a lookup that found all it looks for).
pub(crate) fn browse_until(
    timeout: Duration,
    interfaces: &Interfaces,
    stop: &AtomicBool,
    enough: &mut dyn FnMut(&[Announcement]) -> bool,
) -> Result<Vec<Announcement>> {
    // The timeout counts from the call: starting the daemon is part of it.
    let deadline = Instant::now() + timeout;
    let daemon = ServiceDaemon::new().map_err(|e| mdns_error("start mDNS", e))?;
    let result = collect(&daemon, deadline, interfaces, stop, enough);
    // The daemon's thread ends on shutdown; its answer is not worth waiting for.
    let _ = daemon.shutdown();
    result
}

fn collect(
    daemon: &ServiceDaemon,
    deadline: Instant,
    interfaces: &Interfaces,
    stop: &AtomicBool,
    enough: &mut dyn FnMut(&[Announcement]) -> bool,
) -> Result<Vec<Announcement>> {
    apply(daemon, interfaces).map_err(|e| mdns_error("choose the interfaces for mDNS", e))?;
    let shelly = daemon
        .browse(SHELLY_SERVICE)
        .map_err(|e| mdns_error("browse _shelly._tcp", e))?;
    let http = daemon
        .browse(HTTP_SERVICE)
        .map_err(|e| mdns_error("browse _http._tcp", e))?;
    let mut found = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || found.len() >= MAX_ANNOUNCEMENTS || stop.load(Ordering::SeqCst) {
            break;
        }
        let mut selector = flume_select(&shelly, &http, left.min(Duration::from_millis(50)));
        let before = found.len();
        while let Some(event) = selector.pop() {
            if let ServiceEvent::ServiceResolved(r) = event {
                found.push(Announcement {
                    service: r.ty_domain.clone(),
                    instance: r.fullname.clone(),
                    host: r.host.clone(),
                    addresses: r.addresses.iter().map(|a| a.to_ip_addr()).collect(),
                    port: r.port,
                    txt: r
                        .txt_properties
                        .iter()
                        .map(|p| (p.key().to_string(), p.val().map(<[u8]>::to_vec)))
                        .collect(),
                });
            }
        }
        if found.len() > before && enough(&found[before..]) {
            break;
        }
    }
    Ok(found)
}

/// Whatever both receivers hold now, else waits up to `wait` on the first.
fn flume_select(
    a: &mdns_sd::Receiver<ServiceEvent>,
    b: &mdns_sd::Receiver<ServiceEvent>,
    wait: Duration,
) -> Vec<ServiceEvent> {
    let mut events: Vec<ServiceEvent> = a.try_iter().chain(b.try_iter()).collect();
    if events.is_empty()
        && let Ok(e) = a.recv_timeout(wait)
    {
        events.push(e);
    }
    events
}

fn mdns_error(what: &str, e: mdns_sd::Error) -> Error {
    Error::Io {
        context: format!(
            "cannot {what}: {e}; mDNS needs UDP port 5353 and a network interface with multicast (check the firewall, or pass the interfaces to use)"
        ),
        source: std::io::Error::other(e.to_string()),
    }
}
