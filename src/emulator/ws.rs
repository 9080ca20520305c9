//! Gen2+ WebSocket RPC (`GET /rpc` with `Upgrade: websocket`): the server side of RFC 6455 (the framing is
//! the client's, `crate::driver::ws::frame`), request frames answered by the same dispatcher as `POST /rpc`
//! (with in-frame digest auth, `ws_answer.rs`), and notifications pushed to every client that has sent a
//! request with a `src`: `NotifyStatus` with the changed fields whenever the emulated state changes
//! (`NotifyFullStatus` when a component appeared or went, as after a profile switch), `NotifyEvent` for fired
//! events.
//!
//! The upgrade is answered where its request was read (the poller for a lent port, `accepting.rs`; the
//! port's thread under a fault that keeps its listener); from then on the connection is served by the
//! emulator's one poller (`ws_poller.rs`), without a thread of its own.
//! Faults: [`WsHub::drop_all`] cuts every connection without a close frame;
//! [`WsHub::set_stalled`] makes connections stop reading and writing until released;
//! [`WsHub::set_hold_upgrades`] leaves upgrade requests unanswered.

use std::io::Write;
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::device::Device;
pub(crate) use super::duplex::Duplex;
use super::faults::Phase;
use super::lock::lock;
use super::server::Request;
use super::state::DeviceState;
pub(crate) use super::ws_hub::WsHub;
use super::ws_hub::{Client, Outbox};
use super::{notify, ws_poller};
use crate::driver::ws::accept_key;

/// Connections per device (real devices allow a handful).
const MAX_CLIENTS: usize = 16;
/// How long a blocked write of the upgrade's answer may take (on the port's thread; on the poller the socket is
/// new and takes the answer at once, or the connection ends).
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

impl WsHub {
    /// Called with the state lock held after every access to the state: notifies what changed (when it may
    /// have, `changed`).
    pub(crate) fn on_state(&self, dev: &Device, s: &DeviceState, changed: bool) {
        if !changed || !self.subscribed.load(Ordering::SeqCst) {
            return;
        }
        if !self.measured_values(dev, s) {
            return;
        }
        if let Some((method, params)) = notify::status_change(dev, s, &self.last) {
            self.broadcast(&dev.ident.id, method, &params);
        }
    }

    /// Whether changes are measured as values now: the text a subscription was measured with becomes them
    /// at its first change; with neither, the status now is kept as text (measured, nothing to say).
    fn measured_values(&self, dev: &Device, s: &DeviceState) -> bool {
        let mut said = lock(&self.said);
        let mut last = lock(&self.last);
        if last.is_some() {
            return true;
        }
        match said.take() {
            Some(text) => {
                *last = Some(notify::comparable_text(&text));
                true
            }
            None => {
                *said = Some(notify::status_text(dev, s));
                false
            }
        }
    }

    /// Whether a subscription has what its changes are measured against.
    pub(crate) fn is_measured(&self) -> bool {
        lock(&self.said).is_some() || lock(&self.last).is_some()
    }

    /// `text`, the status a subscribing `Shelly.GetStatus` answered, is what later changes are measured
    /// against when nothing is yet.
    pub(crate) fn measure_from_text(&self, text: &str) {
        let mut said = lock(&self.said);
        if said.is_none() && lock(&self.last).is_none() {
            *said = Some(text.to_string());
        }
    }

    /// A fired event (webhook form `input.button_push`, component id).
    pub(crate) fn on_event(&self, dev: &Device, event: &str, cid: usize) {
        if !self.subscribed.load(Ordering::SeqCst) {
            return;
        }
        self.broadcast(
            &dev.ident.id,
            "NotifyEvent",
            &notify::event(dev, event, cid),
        );
    }

    /// A `NotifyEvent` of the device itself (`notify::sys_event`).
    pub(crate) fn on_sys(&self, dev: &Device, params: &Value) {
        if self.subscribed.load(Ordering::SeqCst) {
            self.broadcast(&dev.ident.id, "NotifyEvent", params);
        }
    }
}

/// Whether a request asks for a WebSocket upgrade.
pub(crate) fn is_upgrade(req: &Request) -> bool {
    req.header("upgrade")
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Answers an upgrade request on `/rpc` and hands the connection to the poller; anything wrong gets a 400.
pub(crate) fn accept(dev: Arc<Device>, req: &Request, mut stream: Duplex) {
    // Counted before anything is answered: a client that saw the answer sees the count.
    dev.net.count("ws /rpc".into());
    let key = req.header("sec-websocket-key").unwrap_or("");
    let connection_ok = req.header("connection").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
    });
    let valid = req.method == "GET"
        && req.path == "/rpc"
        && connection_ok
        && req.header("sec-websocket-version") == Some("13")
        && key.len() == 24;
    let full = dev.ws.connections() >= MAX_CLIENTS || dev.ws.stopping.load(Ordering::SeqCst);
    if !valid || full {
        let status = if valid {
            "503 Service Unavailable"
        } else {
            "400 Bad Request"
        };
        return refuse(&mut stream, status);
    }
    if dev.ws.hold_upgrades.load(Ordering::SeqCst) {
        // Kept open and never answered, until released or the client gives up.
        if stream.tcp.set_nonblocking(true).is_ok() {
            lock(&dev.ws.held).push(stream.tcp);
        }
        return;
    }
    // Started only for an upgrade that is answered.
    let poller = match ws_poller::shared() {
        Ok(p) => p,
        Err(e) => {
            log::warn!("emulator: WebSocket upgrade refused: {e}");
            return refuse(&mut stream, "503 Service Unavailable");
        }
    };
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    );
    let _ = stream.tcp.set_write_timeout(Some(WRITE_TIMEOUT));
    if stream.write_all(answer.as_bytes()).is_err() {
        return;
    }
    let Ok(cut) = stream.tcp.try_clone() else {
        return;
    };
    let Some((tcp, tls)) = stream.into_parts() else {
        return;
    };
    let src = Arc::new(Mutex::new(None));
    let outbox = Arc::new(Outbox::new(poller.token(), poller.bell()));
    let id = dev.ws.next_id.fetch_add(1, Ordering::Relaxed);
    {
        let mut clients = lock(&dev.ws.clients);
        // Checked under the lock `drop_all` takes after `Refuse` is set: an upgrade that was under way when
        // the port began refusing is cut too, not left as the one live connection of a refusing device.
        if matches!(dev.net.phase(Instant::now()), Phase::Refuse(_)) {
            let _ = cut.shutdown(Shutdown::Both);
            return;
        }
        clients.push(Client {
            id,
            outbox: Arc::clone(&outbox),
            stream: cut,
            src: Arc::clone(&src),
        });
    }
    poller.adopt(ws_poller::Adopted {
        dev,
        id,
        tcp,
        tls,
        outbox,
        src,
    });
}

/// Answers an upgrade that is not taken with `status` (the connection closes).
fn refuse(stream: &mut Duplex, status: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}
