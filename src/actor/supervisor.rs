//! The supervisor thread (`sd-supervisor`): schedules the background refresh and liveness check of every device.

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, never, select, tick};

use super::worker::{Command, WorkerTx};

/// How often sleeping devices are checked for a missed period when background refreshes are off (they never
/// cause I/O: a sleeping device's `Tick` only looks at how long it has been silent).
pub(crate) const SLEEP_CHECK: Duration = Duration::from_secs(30);

/// Starts the supervisor. It stops when `stop` is dropped. `sleepers`: the workers of devices that sleep between
/// reports, ticked every [`SLEEP_CHECK`] when `interval` is `None`.
pub(crate) fn spawn(
    workers: Vec<WorkerTx>,
    sleepers: Vec<WorkerTx>,
    interval: Option<Duration>,
    stop: Receiver<()>,
) -> std::io::Result<JoinHandle<()>> {
    let builder = std::thread::Builder::new()
        .name("sd-supervisor".into())
        .stack_size(128 * 1024);
    crate::log_scope::spawn(builder, move || {
        let ticker = interval.map(tick).unwrap_or_else(never);
        let sleep_ticker = if interval.is_none() && !sleepers.is_empty() {
            tick(SLEEP_CHECK)
        } else {
            never()
        };
        loop {
            select! {
                // A message or a disconnect both mean "stop".
                recv(stop) -> _ => break,
                recv(ticker) -> _ => {
                    for w in &workers {
                        // A busy worker already has work queued; skip rather than pile up checks.
                        let _ = w.try_send(Command::Tick);
                    }
                }
                recv(sleep_ticker) -> _ => {
                    for w in &sleepers {
                        let _ = w.try_send(Command::Tick);
                    }
                }
            }
        }
    })
}
