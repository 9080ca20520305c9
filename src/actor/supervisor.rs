//! The supervisor thread (`sd-supervisor`): schedules the background refresh and liveness check of every device.

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, never, select, tick};

use super::worker::{Command, WorkerTx};

/// Starts the supervisor. It stops when `stop` is dropped.
pub(crate) fn spawn(
    workers: Vec<WorkerTx>,
    interval: Option<Duration>,
    stop: Receiver<()>,
) -> std::io::Result<JoinHandle<()>> {
    let builder = std::thread::Builder::new()
        .name("sd-supervisor".into())
        .stack_size(128 * 1024);
    crate::log_scope::spawn(builder, move || {
        let ticker = interval.map(tick).unwrap_or_else(never);
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
            }
        }
    })
}
