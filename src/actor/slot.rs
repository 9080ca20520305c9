//! `Slot`: where a worker publishes its device's snapshot. Below both the worker (the one writer) and `peers.rs`
//! (which a worker reads other devices' outputs through), so neither needs the other's module.

use std::sync::{Arc, RwLock};

use crate::objects::Device;

/// The latest published snapshot of a device, shared with readers.
pub(crate) type Slot = Arc<RwLock<Arc<Device>>>;

/// Reads the snapshot in a slot.
pub(crate) fn snapshot(slot: &Slot) -> Arc<Device> {
    slot.read().unwrap_or_else(|e| e.into_inner()).clone()
}
