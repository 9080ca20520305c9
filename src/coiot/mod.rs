//! Gen1 push over CoIoT (Shelly's CoAP dialect on UDP 5683): the datagram parser (`message.rs`), the
//! device's description of its sensor ids (`description.rs`), and the listener thread `sd-coiot`
//! (`listener.rs`) that turns a status into what a webhook or a push notification gives: states for the
//! worker's `HookInbox`, events for the queue (`Channel: coiot`, deduplicated with webhooks).

pub(crate) mod description;
pub(crate) mod listener;
pub(crate) mod message;
pub(crate) mod setup;

use std::sync::{Arc, Mutex};

use description::Description;

/// What a Gen1 device's driver and the listener share: the device's description (`GET /cit/d`, fetched by
/// the driver with its webhooks, read by the listener). It outlives driver rebuilds.
#[derive(Debug, Default)]
pub(crate) struct Link {
    described: Mutex<Option<Arc<Description>>>,
}

impl Link {
    /// The device's description, once fetched.
    pub(crate) fn description(&self) -> Option<Arc<Description>> {
        self.described
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps the description the device served.
    pub(crate) fn describe(&self, d: Description) {
        *self.described.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(d));
    }
}
