//! Finding devices on the local network: mDNS / DNS-SD browse, then one HTTP request per candidate.
//!
//! 1. `browse.rs`: an mdns-sd daemon (its own thread, alive only during the call) asks for `_shelly._tcp` and
//!    `_http._tcp` on the private and link-local interfaces ([`Interfaces`]) for the browse time.
//! 2. `candidate.rs`: each resolved service becomes a [`Candidate`] or nothing. Gen2+ announce `_shelly._tcp`
//!    with TXT `gen` (and `app`, `ver`); Gen1 only `_http._tcp` with host names like `shelly1pm-<id>`; Tasmota
//!    `_http._tcp` with TXT `devicetype=tasmota` when its mDNS is on (`SetOption55 1`, builds with mDNS only).
//! 3. `confirm.rs`: every candidate is asked once over HTTP (`/shelly`, Tasmota `Status 0`), 32 at a time, each
//!    within [`CONFIRM_TIMEOUT`]. Only what answers like the device it claims to be is reported; the rest is
//!    logged at DEBUG. Announcements are hints: the device's answer decides model, generation and MAC.
//!
//! [`discover`] needs no configuration; [`Controller::discover`](crate::Controller::discover) also marks the
//! devices the configuration already has ([`Configured`]).

mod browse;
mod candidate;
mod configured;
mod confirm;
mod finder;
mod found;
mod interfaces;
mod render;

pub use candidate::{Announcement, Candidate, HTTP_SERVICE, Hint, SHELLY_SERVICE, candidate};
pub use confirm::confirm;
pub use finder::{FOLLOW_BROWSE, Finder, Lookup, MdnsFinder};
pub use found::{Configured, Discovered, normalise_mac};
pub use interfaces::{Interfaces, is_private_or_link_local};
pub use render::{table, yaml};

// Only the emulator's announcer uses it from outside the module.
#[cfg(feature = "emulator")]
pub(crate) use interfaces::apply as apply_interfaces;

use crate::error::Result;
use crate::models::ModelLibrary;
use std::time::Duration;

/// How long one candidate's confirming request may take, after the browse time.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(2);
/// Confirming requests in flight at once.
const PARALLEL_CONFIRMS: usize = 32;

/// What [`discover_with`] does.
#[derive(Clone, Debug)]
pub struct DiscoverOptions {
    /// How long to listen for announcements. Candidates are confirmed as they are heard, while listening
    /// goes on; one heard at the very end may add up to [`CONFIRM_TIMEOUT`].
    pub timeout: Duration,
    /// Interfaces to send queries on.
    pub interfaces: Interfaces,
}

impl DiscoverOptions {
    /// Listen for `timeout` on the private and link-local interfaces.
    pub fn new(timeout: Duration) -> Self {
        DiscoverOptions {
            timeout,
            interfaces: Interfaces::Private,
        }
    }
}

/// Devices on the local network that announce themselves over mDNS and confirm over HTTP, listening for
/// `timeout` on the private and link-local interfaces. Needs no configuration.
///
/// ```no_run
/// let found = smartdev::discover(std::time::Duration::from_secs(3))?;
/// for d in &found {
///     println!("{} {:?} at {}:{}", d.name, d.model, d.address, d.port);
/// }
/// # Ok::<(), smartdev::Error>(())
/// ```
pub fn discover(timeout: Duration) -> Result<Vec<Discovered>> {
    discover_with(&DiscoverOptions::new(timeout))
}

/// [`discover`] with options (which interfaces).
pub fn discover_with(options: &DiscoverOptions) -> Result<Vec<Discovered>> {
    discover_in(options, &ModelLibrary::embedded())
}

pub(crate) fn discover_in(
    options: &DiscoverOptions,
    models: &ModelLibrary,
) -> Result<Vec<Discovered>> {
    let never = std::sync::atomic::AtomicBool::new(false);
    // Confirmed as heard, while listening goes on: the whole call takes about `timeout`, not `timeout` plus
    // a round of confirmations at the end.
    let mut asked: Vec<(std::net::IpAddr, u16)> = Vec::new();
    let mut found: Vec<Discovered> = Vec::new();
    browse::browse_until(options.timeout, &options.interfaces, &never, &mut |batch| {
        // An address asked already (the same device on the other service) is not asked again.
        let fresh: Vec<Announcement> = batch
            .iter()
            .filter(|a| candidate(a).is_none_or(|c| !asked.contains(&(c.address, c.port))))
            .cloned()
            .collect();
        asked.extend(
            fresh
                .iter()
                .filter_map(candidate)
                .map(|c| (c.address, c.port)),
        );
        for d in confirm_all(&fresh, CONFIRM_TIMEOUT, models) {
            if !found.iter().any(|k| twins(k, &d)) {
                found.push(d);
            }
        }
        false
    })?;
    found.sort_by(|a, b| a.name.cmp(&b.name).then(a.address.cmp(&b.address)));
    Ok(found)
}

/// The same device found twice: the same MAC, or (without one) the same address and port.
fn twins(a: &Discovered, b: &Discovered) -> bool {
    match (&a.mac_address, &b.mac_address) {
        (Some(x), Some(y)) => x == y,
        _ => a.address == b.address && a.port == b.port,
    }
}

/// The confirmed devices among `announcements`, one per MAC (else per address and port), sorted by name:
/// the candidates are deduplicated by address and port, then asked in parallel, each within `timeout`.
pub fn confirm_all(
    announcements: &[Announcement],
    timeout: Duration,
    models: &ModelLibrary,
) -> Vec<Discovered> {
    let mut candidates: Vec<Candidate> = Vec::new();
    for c in announcements.iter().filter_map(candidate) {
        match candidates
            .iter_mut()
            .find(|k| k.address == c.address && k.port == c.port)
        {
            // `_shelly._tcp` and a TXT `gen` say more than a host name.
            Some(known) if known.hint != Hint::ShellyRpc && c.hint == Hint::ShellyRpc => *known = c,
            Some(_) => {}
            None => candidates.push(c),
        }
    }
    let mut found: Vec<Discovered> = Vec::new();
    for chunk in candidates.chunks(PARALLEL_CONFIRMS) {
        let answers: Vec<Option<Discovered>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|c| {
                    std::thread::Builder::new()
                        .name("sd-discover".into())
                        .stack_size(256 * 1024)
                        .spawn_scoped(s, move || confirm(c, timeout, models))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.ok().and_then(|h| h.join().ok()).flatten())
                .collect()
        });
        for d in answers.into_iter().flatten() {
            if !found.iter().any(|k| twins(k, &d)) {
                found.push(d);
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name).then(a.address.cmp(&b.address)));
    found
}
