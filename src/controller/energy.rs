//! The controller's energy history call: `energy_history`. The request runs on the meter's device worker
//! (`Command::Energy`); each family's protocol is in its driver (`driver/rpc/energy.rs`, `driver/gen1_energy.rs`).

use super::Controller;
use crate::actor::energy_op::EnergyAsk;
use crate::actor::worker::Command;
use crate::energy::{EnergyHistory, check_range};
use crate::error::Result;
use crate::objects::{ComponentKind, Identity};

impl Controller {
    /// Reads a meter's own interval records over `[from, to)` (Unix seconds, UTC) from the device's memory
    /// (device I/O): records in time order, and a [`HistoryGap`](crate::HistoryGap) wherever the device has
    /// none (it was off, or the records are older than it keeps), never zero energy. A 3-phase meter's records
    /// hold all three phases ([`EnergyHistory::channels`] names them). A meter that keeps no history (a
    /// switch's or plug's meter, Tasmota, simulated devices) gives [`Error::NoHistory`](crate::Error::NoHistory); `from` not before
    /// `to` gives [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn energy_history(
        &self,
        meter: impl Into<Identity>,
        from: i64,
        to: i64,
    ) -> Result<EnergyHistory> {
        let meter = &meter.into();
        let (di, ci) = self
            .shared
            .directory
            .component(ComponentKind::Meter, meter)?;
        check_range(from, to)?;
        self.ask(di, |reply| {
            Command::Energy(EnergyAsk {
                meter: ci,
                from,
                to,
                reply,
            })
        })
    }
}
