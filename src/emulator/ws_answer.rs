//! What a WebSocket request frame of a Gen2+ device gets back, in two halves around the port's latency: what
//! is known when the frame comes ([`prepare`]: its count, the port's fault, when it is due) and, once it is
//! due, the answer itself ([`complete`]: in-frame digest auth, the client's subscription, the dispatcher's
//! answer). The poller (`ws_poller.rs`) waits between them without holding a thread.

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::Fault;
use super::device::Device;
use super::lock::lock;
use super::server::Response;
use super::{auth, rpc};
use crate::driver::ws::frame::{self, Opcode};

/// What a request frame gets back.
pub(super) enum Reply {
    /// This response frame's payload.
    Frame(Vec<u8>),
    /// The request was carried out, then the connection ends halfway through its response frame.
    Cut(Vec<u8>),
    /// Nothing.
    Silent,
}

/// A request frame as it came.
pub(super) enum Prepared {
    /// Answered at once (not JSON, a blackhole, malformed JSON).
    Now(Reply),
    /// Answered by [`complete`] at `due`, one latency after its bytes came.
    Later {
        request: Map<String, Value>,
        fault: Fault,
        due: Instant,
    },
}

/// One request frame, counted under `rpc <Method>` like HTTP calls, with the port's fault and latency: no
/// answer under a blackhole, a broken frame under malformed JSON, the rest answered at `arrived` plus the
/// latency.
pub(super) fn prepare(dev: &Device, text: &str, arrived: Instant) -> Prepared {
    let Ok(Value::Object(f)) = crate::untrusted_json::parse(text.as_bytes()) else {
        let e = json!({"id": null, "src": dev.ident.id, "error": {"code": -32700, "message": "Parse error"}});
        return Prepared::Now(Reply::Frame(Response::json_whole(200, &e).body));
    };
    let method = f.get("method").and_then(Value::as_str).unwrap_or("");
    let key = format!("rpc {method}");
    let (fault, latency) = dev.net.for_request(&key);
    dev.net.count(key);
    dev.ws.requests.fetch_add(1, Ordering::Relaxed);
    match fault {
        Fault::Blackhole => Prepared::Now(Reply::Silent),
        Fault::MalformedJson => Prepared::Now(Reply::Frame(b"{\"broken\":".to_vec())),
        _ => Prepared::Later {
            request: f,
            fault,
            due: arrived + latency,
        },
    }
}

/// The answer to a request that is due: an authentication error, or the dispatcher's answer (the first request
/// let through subscribes the client: `src` is set); cut off under a truncated-body fault, after the request
/// was carried out, as over HTTP.
pub(super) fn complete(
    dev: &Device,
    f: &Map<String, Value>,
    fault: Fault,
    src: &Mutex<Option<String>>,
) -> Reply {
    let body = match auth::guard_frame(&dev.auth, f) {
        Some(error) => {
            let mut out = Map::new();
            out.insert("id".into(), f.get("id").cloned().unwrap_or(Value::Null));
            out.insert("src".into(), json!(dev.ident.id));
            if let Some(s) = f.get("src") {
                out.insert("dst".into(), s.clone());
            }
            out.insert("error".into(), error);
            Response::json_whole(200, &Value::Object(out)).body
        }
        None => {
            // Let through (authenticated, or open): from now on the client gets notifications.
            if let Some(s) = f.get("src").and_then(Value::as_str) {
                let mut g = lock(src);
                if g.is_none() {
                    *g = Some(crate::text::clip(s, 64));
                    drop(g);
                    dev.ws.subscribed.store(true, Ordering::SeqCst);
                    // The status now is what later changes are measured against: a `Shelly.GetStatus`
                    // measures with the status it answers (`rpc::answer_text`), any other request here.
                    if !rpc::is_status_call(f) {
                        dev.measure_status();
                    }
                }
            }
            rpc::answer_text(dev, f)
        }
    };
    if fault == Fault::TruncatedBody {
        Reply::Cut(body)
    } else {
        Reply::Frame(body)
    }
}

/// One flood frame: a `NotifyStatus` whose power changes every time, padded to about `bytes`.
pub(super) fn flood_frame(dev: &Device, dst: &str, n: u64, bytes: usize) -> Vec<u8> {
    let mut fields = json!({"id": 0, "apower": n as f64 / 10.0});
    if bytes > 200 {
        fields["pad"] = json!("x".repeat(bytes - 200));
    }
    let frame = json!({"src": dev.ident.id, "dst": dst, "method": "NotifyStatus",
        "params": {"ts": n as f64 / 100.0, "switch:0": fields}});
    frame::encode(Opcode::Text, true, frame.to_string().as_bytes(), None)
}
