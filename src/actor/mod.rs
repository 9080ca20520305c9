//! Threads: one worker per device, the supervisor, the push poller and the finder of devices that moved.

pub(crate) mod bell;
pub(crate) mod energy_op;
pub(crate) mod find;
pub(crate) mod firmware_op;
pub(crate) mod handshakes;
pub(crate) mod hook_inbox;
pub(crate) mod mqtt;
pub(crate) mod ota_board;
pub(crate) mod outbound;
pub(crate) mod pace;
pub(crate) mod peers;
pub(crate) mod push;
pub(crate) mod pushed_states;
pub(crate) mod restart;
pub(crate) mod slot;
pub(crate) mod supervisor;
pub(crate) mod update;
pub(crate) mod worker;
