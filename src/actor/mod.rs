//! Threads: one worker per device and one supervisor.

pub(crate) mod hook_inbox;
pub(crate) mod peers;
pub(crate) mod push;
pub(crate) mod restart;
pub(crate) mod slot;
pub(crate) mod supervisor;
pub(crate) mod worker;
