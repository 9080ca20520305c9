//! `Family`: which API a device speaks. A leaf below `device.rs` and `auth.rs` (whose rules differ per family).

/// The API family a device speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    /// Shelly Gen1 REST.
    Gen1,
    /// Shelly Gen2+ JSON-RPC.
    Rpc,
    /// Tasmota `/cm`.
    Tasmota,
}
