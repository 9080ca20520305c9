//! The push channel's transport, used by `actor/push.rs` (see ARCHITECTURE.md, "Push channel"):
//! a strict, synchronous RFC 6455 client ([`client`]), the same handshake and one call without blocking for
//! a poller (`dial`), its framing ([`frame`], shared with the emulator's
//! server side), and Shelly JSON-RPC over it ([`rpc`]: calls with in-frame digest auth, typed notifications);
//! `secure` runs TLS (WSS) over the poller's socket; `tunnel` (crate-private) lends a live push connection to the device's driver for its requests, and
//! `spent` brings the statuses it parsed back to the poller to be freed.

pub mod client;
pub(crate) mod dial;
pub mod frame;
pub(crate) mod pre_read;
pub mod rpc;
pub(crate) mod secure;
pub(crate) mod spent;
pub(crate) mod tunnel;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha1::{Digest as _, Sha1};

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key` (RFC 6455 §4.2.2).
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.as_bytes());
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    BASE64.encode(h.finalize())
}
