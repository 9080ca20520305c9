//! The firmware operations a worker runs for `actor/update.rs` (which drives an update through them), each
//! with its typed reply.

use crossbeam_channel::Sender;

use crate::driver::FirmwareState;
use crate::error::Result;
use crate::firmware::{FirmwareChannel, FirmwareInfo};

/// One firmware step on a device's worker.
pub(crate) enum FirmwareOp {
    /// The running version and the versions on offer.
    Check(Sender<Result<FirmwareInfo>>),
    /// Ask the device to install `channel`'s version (confirming its MAC first); from then on the worker logs
    /// the device's restart as expected, not as a warning.
    Start(FirmwareChannel, Sender<Result<Option<String>>>),
    /// One quick look (one attempt per request) at the version and whether it updates.
    Poll(Sender<Result<FirmwareState>>),
    /// The update is over: the driver forgets what the device said about itself, a full read publishes the
    /// device as it is now, and its going offline is news again.
    Finish(Sender<Result<()>>),
}

impl FirmwareOp {
    /// Answers the operation with `error` without touching the device.
    pub(crate) fn refuse(self, error: crate::Error) {
        match self {
            FirmwareOp::Check(reply) => drop(reply.send(Err(error))),
            FirmwareOp::Start(_, reply) => drop(reply.send(Err(error))),
            FirmwareOp::Poll(reply) => drop(reply.send(Err(error))),
            FirmwareOp::Finish(reply) => drop(reply.send(Err(error))),
        }
    }
}
