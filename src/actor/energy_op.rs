//! The energy history request a worker runs for `controller/energy.rs`, with its typed reply.

use crossbeam_channel::Sender;

use crate::energy::EnergyHistory;
use crate::error::Result;

/// Read meter `meter`'s own records over `[from, to)` (Unix seconds).
pub(crate) struct EnergyAsk {
    /// The meter's channel on its device (0-based).
    pub meter: usize,
    /// Start of the range.
    pub from: i64,
    /// End of the range, exclusive.
    pub to: i64,
    /// Where the history goes.
    pub reply: Sender<Result<EnergyHistory>>,
}
