//! [`Finder`]: how a controller looks up the devices configured with a `MAC` that do not answer at their
//! address. The default one browses mDNS ([`MdnsFinder`]); an application may give its own (a router's lease
//! table, a fixed list in tests) with [`ControllerBuilder::finder`](crate::ControllerBuilder::finder).

use super::found::Discovered;
use super::{DiscoverOptions, Interfaces, confirm_all};
use crate::error::Result;
use crate::models::ModelLibrary;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the default finder listens for announcements in one lookup.
pub const FOLLOW_BROWSE: Duration = Duration::from_secs(2);

/// One lookup: the MACs being looked for, and whether the controller is closing (then the lookup should end
/// at once; its result is not used).
#[derive(Clone, Debug)]
pub struct Lookup {
    missing: Vec<String>,
    stop: Arc<AtomicBool>,
}

impl Lookup {
    /// A lookup for `missing` (MACs spelt `AA:BB:CC:DD:EE:FF`) that ends when `stop` is set.
    pub fn new(missing: Vec<String>, stop: Arc<AtomicBool>) -> Self {
        Lookup { missing, stop }
    }

    /// The MACs of the devices that do not answer at their address, `AA:BB:CC:DD:EE:FF`.
    pub fn missing(&self) -> &[String] {
        &self.missing
    }

    /// Whether the controller is closing: stop looking.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub(crate) fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }
}

/// Looks up devices: every device it can see, with its MAC, address and port. The controller moves a device
/// configured with a `MAC` to an address a result gives for that MAC, after the device's own answer there
/// confirmed the MAC: a finder gives hints, never identities. Called on the controller's `sd-find` thread, at
/// most once a minute, for every missing device at once.
pub trait Finder: Send {
    /// The devices seen now (at least those among `lookup.missing()` that could be found).
    fn find(&mut self, lookup: &Lookup) -> Result<Vec<Discovered>>;
}

impl<F> Finder for F
where
    F: FnMut(&Lookup) -> Result<Vec<Discovered>> + Send,
{
    fn find(&mut self, lookup: &Lookup) -> Result<Vec<Discovered>> {
        self(lookup)
    }
}

/// The default [`Finder`]: an mDNS browse of [`FOLLOW_BROWSE`] on the private and link-local interfaces (ended
/// early when the controller closes), then the confirming request of each candidate, as in
/// [`discover`](crate::discover).
pub struct MdnsFinder {
    options: DiscoverOptions,
    models: ModelLibrary,
}

impl MdnsFinder {
    /// Browses the private and link-local interfaces for [`FOLLOW_BROWSE`], confirming with `models`.
    pub fn new(models: ModelLibrary) -> Self {
        MdnsFinder {
            options: DiscoverOptions {
                timeout: FOLLOW_BROWSE,
                interfaces: Interfaces::Private,
            },
            models,
        }
    }
}

impl Finder for MdnsFinder {
    /// Confirms the candidates as they are heard, and ends the browse as soon as every MAC looked for has
    /// confirmed (usually within a fraction of a second), else after [`FOLLOW_BROWSE`].
    fn find(&mut self, lookup: &Lookup) -> Result<Vec<Discovered>> {
        let mut confirmed: Vec<Discovered> = Vec::new();
        let wanted = lookup.missing();
        let models = &self.models;
        super::browse::browse_until(
            self.options.timeout,
            &self.options.interfaces,
            lookup.stop_flag(),
            &mut |batch| {
                for d in confirm_all(batch, super::CONFIRM_TIMEOUT, models) {
                    if !confirmed
                        .iter()
                        .any(|k| k.address == d.address && k.port == d.port)
                    {
                        confirmed.push(d);
                    }
                }
                !wanted.is_empty()
                    && wanted.iter().all(|m| {
                        confirmed
                            .iter()
                            .any(|d| d.mac_address.as_deref() == Some(m.as_str()))
                    })
            },
        )?;
        if lookup.stopped() {
            return Ok(Vec::new());
        }
        Ok(confirmed)
    }
}
