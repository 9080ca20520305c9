//! `Source`: who switched an output or moved a cover last. A leaf below `state.rs` and `cover.rs` (a cover
//! is part of the state and records its own source).

/// Who switched an output last (rendered per protocol).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// Power-on state.
    Init,
    /// A request over the network.
    Remote,
    /// The test (physical switch).
    Local,
}
