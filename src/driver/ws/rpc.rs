//! Shelly JSON-RPC over a WebSocket (`ws://<host>/rpc`): the same request and response frames as `POST /rpc`,
//! plus notifications the device pushes once we have sent a request with our `src`.
//!
//! A call sends `{"id","src","method","params"}` and reads until the response with that id; every notification
//! read meanwhile is parsed into a [`Notification`] and queued (at most `MAX_QUEUED`, 256; the oldest go first and
//! are counted), answers to ids we no longer wait for are skipped. Authentication is inside the frame: error
//! 401 carries a JSON challenge in its `message`; the request is sent again with an `auth` object (HA2 is the
//! hash of `dummy_method:dummy_uri`, as Shelly defines it for frames). The nonce is kept and reused with a
//! rising `nc` (sent as `auth.nc`); a device that only accepts `nc` 1 answers with a new challenge, which is
//! answered once more per call.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::client::{Connection, Timeouts, WsError};
use crate::driver::digest::{self, Algorithm};

/// Notifications kept between reads; beyond it the oldest are dropped (and counted).
pub(crate) const MAX_QUEUED: usize = 256;
/// Events kept from one `NotifyEvent`.
const MAX_EVENTS: usize = 64;

/// The in-frame error code of firmware 2.x out of nonce slots. What real firmware puts in a frame is not
/// documented: assumed to be its HTTP status (429 Too many requests), as the emulator answers.
pub(crate) const BUSY_CODE: i64 = 429;
/// What an in-frame 429 means, for error texts.
pub(crate) const BUSY: &str = "the device is busy (429 Too many requests over its WebSocket: all 32 of its nonce slots are taken, by other clients)";

/// One event of a `NotifyEvent`.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// `switch:0`, `input:1`, `sys`...
    pub component: String,
    /// The component's id, when it has one.
    pub id: Option<u64>,
    /// `single_push`, `toggle`...
    pub event: String,
    /// Unix time of the event, when given.
    pub ts: Option<f64>,
    /// Every other field of the event (`state`, `data`...).
    pub fields: Map<String, Value>,
}

/// A parsed notification.
#[derive(Clone, Debug, PartialEq)]
pub enum Notification {
    /// `NotifyStatus`: component key (`switch:0`) → the changed part of its status.
    Status {
        /// Unix time, when given.
        ts: Option<f64>,
        /// Changed components.
        components: Map<String, Value>,
    },
    /// `NotifyFullStatus`: the whole status, as `Shelly.GetStatus` returns it.
    FullStatus {
        /// Unix time, when given.
        ts: Option<f64>,
        /// The status.
        status: Map<String, Value>,
    },
    /// `NotifyEvent`.
    Event {
        /// Unix time, when given.
        ts: Option<f64>,
        /// The events (at most 64 per notification).
        events: Vec<Event>,
    },
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The socket failed or closed; the connection is unusable.
    Ws(WsError),
    /// No answer to the call in time (the connection stays usable; a late answer is skipped).
    Timeout,
    /// The device's RPC error.
    Rpc {
        /// Its code.
        code: i64,
        /// Its message (clipped, control characters escaped).
        message: String,
    },
    /// The device asks for a password and none is configured.
    AuthMissing,
    /// The device refused our password.
    AuthRefused,
    /// A 401 without a usable challenge.
    NoChallenge,
    /// A frame that is not JSON-RPC.
    Malformed(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Ws(e) => e.fmt(f),
            CallError::Timeout => f.write_str("no answer over the WebSocket in time"),
            CallError::Rpc {
                code: BUSY_CODE, ..
            } => f.write_str(BUSY),
            CallError::Rpc { code, message } => write!(f, "RPC error {code}: {message}"),
            CallError::AuthMissing => f.write_str(
                "the device requires a password; set Password for it (the user is always admin)",
            ),
            CallError::AuthRefused => {
                f.write_str("the device refused the password (wrong password)")
            }
            CallError::NoChallenge => f.write_str("the device sent no usable digest challenge"),
            CallError::Malformed(m) => write!(f, "a malformed RPC frame: {m}"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<WsError> for CallError {
    fn from(e: WsError) -> Self {
        CallError::Ws(e)
    }
}

/// A challenge from a 401 error's message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FrameChallenge {
    realm: String,
    /// Number (firmware before 2.0) or string: echoed as it came.
    nonce: Value,
    algorithm: Algorithm,
    algorithm_text: &'static str,
}

/// Parses the JSON text in a 401 error's message.
pub(crate) fn parse_challenge(message: &str) -> Option<FrameChallenge> {
    let v = crate::untrusted_json::parse(message.as_bytes()).ok()?;
    if v.get("auth_type").and_then(Value::as_str) != Some("digest") {
        return None;
    }
    let nonce = v.get("nonce").filter(|n| n.is_string() || n.is_u64())?;
    let (algorithm, algorithm_text) = match v.get("algorithm").and_then(Value::as_str) {
        None => (Algorithm::Sha256, "SHA-256"),
        Some(a) if a.eq_ignore_ascii_case("SHA-256") => (Algorithm::Sha256, "SHA-256"),
        Some(a) if a.eq_ignore_ascii_case("MD5") => (Algorithm::Md5, "MD5"),
        Some(_) => return None,
    };
    Some(FrameChallenge {
        realm: v.get("realm")?.as_str()?.to_string(),
        nonce: nonce.clone(),
        algorithm,
        algorithm_text,
    })
}

/// The `auth` object answering `ch` with nonce count `nc`.
pub(crate) fn auth_object(ch: &FrameChallenge, password: &str, nc: u32, cnonce: &str) -> Value {
    let a = ch.algorithm;
    let nonce_text = match &ch.nonce {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let ha1 = digest::hash(a, &format!("admin:{}:{password}", ch.realm));
    let ha2 = digest::hash(a, "dummy_method:dummy_uri");
    let response = digest::hash(a, &format!("{ha1}:{nonce_text}:{nc}:{cnonce}:auth:{ha2}"));
    json!({
        "realm": ch.realm,
        "username": "admin",
        "nonce": ch.nonce,
        "cnonce": cnonce,
        "response": response,
        "algorithm": ch.algorithm_text,
        "nc": nc,
    })
}

/// A Shelly RPC channel over one WebSocket.
pub struct RpcSocket {
    conn: Connection,
    src: String,
    password: Option<String>,
    next_id: u64,
    /// The challenge in hand and the last `nc` used with it.
    challenge: Option<(FrameChallenge, u32)>,
    queue: VecDeque<Notification>,
    dropped: u64,
    call_timeout: Duration,
}

impl RpcSocket {
    /// Connects to `ws://<host>/rpc`. `src` names us in every request (the device sends notifications to a
    /// client only after its first request); `password` answers challenges; `call_timeout` bounds each call.
    pub fn connect(
        addr: SocketAddr,
        host: &str,
        src: &str,
        password: Option<&str>,
        timeouts: Timeouts,
        call_timeout: Duration,
    ) -> Result<RpcSocket, CallError> {
        let conn = Connection::connect(addr, host, "/rpc", timeouts)?;
        Ok(RpcSocket {
            conn,
            src: src.to_string(),
            password: password.map(str::to_string),
            next_id: 1,
            challenge: None,
            queue: VecDeque::new(),
            dropped: 0,
            call_timeout,
        })
    }

    /// Calls `method` and returns its `result`, answering digest challenges: the nonce in hand first; a
    /// challenge to a call is answered once, a second one to the same call means a wrong password.
    /// A 429 (no free nonce slot) is returned as is: this standalone client has no retry policy, and the
    /// driver does not use it (its calls go through the poller's `Tunnel`).
    pub fn call(&mut self, method: &str, params: Option<Value>) -> Result<Value, CallError> {
        let mut fresh = false;
        loop {
            let id = self.next_id;
            self.next_id += 1;
            let frame = request_frame(
                id,
                &self.src,
                method,
                params.as_ref(),
                self.password.as_deref(),
                &mut self.challenge,
            );
            self.conn.send_text(&frame.to_string())?;
            let answer = self.wait_for(id)?;
            match take_result(answer) {
                Err(CallError::Rpc { code: 401, message }) => on_challenge(
                    &message,
                    self.password.is_some(),
                    &mut fresh,
                    &mut self.challenge,
                )?,
                other => return other,
            }
        }
    }

    /// Reads until the response to `id`; notifications go to the queue.
    fn wait_for(&mut self, id: u64) -> Result<Map<String, Value>, CallError> {
        let deadline = Instant::now() + self.call_timeout;
        loop {
            let Some(text) = self.conn.recv(deadline)? else {
                return Err(CallError::Timeout);
            };
            let Ok(Value::Object(frame)) = crate::untrusted_json::parse(text.as_bytes()) else {
                return Err(CallError::Malformed("not a JSON object".into()));
            };
            if frame.contains_key("method") {
                self.on_notification(&frame);
                continue;
            }
            if frame.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(frame);
            }
            // An answer to a call that timed out earlier, or to nothing: skipped.
        }
    }

    fn on_notification(&mut self, frame: &Map<String, Value>) {
        queue_notification(&mut self.queue, &mut self.dropped, frame);
    }

    /// The next notification: a queued one, else one read until `deadline` (`Ok(None)` when none came).
    pub fn next_notification(
        &mut self,
        deadline: Instant,
    ) -> Result<Option<Notification>, CallError> {
        loop {
            if let Some(n) = self.queue.pop_front() {
                return Ok(Some(n));
            }
            let Some(text) = self.conn.recv(deadline)? else {
                return Ok(None);
            };
            if let Ok(Value::Object(frame)) = crate::untrusted_json::parse(text.as_bytes())
                && frame.contains_key("method")
            {
                self.on_notification(&frame);
            }
        }
    }

    /// Notifications dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// A heartbeat ping; see [`Connection::last_pong`].
    pub fn ping(&mut self) -> Result<(), CallError> {
        Ok(self.conn.ping(b"sd")?)
    }

    /// The underlying connection.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The close handshake.
    pub fn close(self) {
        self.conn.close();
    }
}

/// The request frame of call `id`, answering the challenge in hand (its `nc` raised) when there is a password.
pub(super) fn request_frame(
    id: u64,
    src: &str,
    method: &str,
    params: Option<&Value>,
    password: Option<&str>,
    challenge: &mut Option<(FrameChallenge, u32)>,
) -> Value {
    let mut frame = json!({"id": id, "src": src, "method": method});
    if let Some(p) = params {
        frame["params"] = p.clone();
    }
    if let (Some(pw), Some((ch, nc))) = (password, challenge) {
        *nc += 1;
        frame["auth"] = auth_object(ch, pw, *nc, &digest::cnonce());
    }
    frame
}

/// A 401 answer to a call: `Ok` to send the call again with the new challenge (now in hand); an error when
/// there is no password, no usable challenge, or the call already answered a fresh one (`fresh`).
pub(super) fn on_challenge(
    message: &str,
    has_password: bool,
    fresh: &mut bool,
    challenge: &mut Option<(FrameChallenge, u32)>,
) -> Result<(), CallError> {
    if !has_password {
        return Err(CallError::AuthMissing);
    }
    let ch = parse_challenge(message).ok_or(CallError::NoChallenge)?;
    if *fresh {
        *challenge = None;
        return Err(CallError::AuthRefused);
    }
    *fresh = true;
    *challenge = Some((ch, 0));
    Ok(())
}

/// Queues a notification frame (at most [`MAX_QUEUED`]; the oldest go first and are counted in `dropped`).
/// A request from the device (it has an id) is not a notification; we serve no methods.
pub(super) fn queue_notification(
    queue: &mut VecDeque<Notification>,
    dropped: &mut u64,
    frame: &Map<String, Value>,
) {
    if frame.contains_key("id") {
        return;
    }
    if let Some(n) = parse_notification(frame) {
        if queue.len() >= MAX_QUEUED {
            queue.pop_front();
            *dropped += 1;
        }
        queue.push_back(n);
    }
}

/// `result`, or the error object as [`CallError::Rpc`].
pub(super) fn take_result(mut frame: Map<String, Value>) -> Result<Value, CallError> {
    if let Some(err) = frame.get("error").filter(|e| !e.is_null()) {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        // A challenge must stay parseable; other messages become one short line.
        let message = if code == 401 {
            crate::text::clip(message, 1024)
        } else {
            crate::text::escape_controls(&crate::text::clip(message, 200)).into_owned()
        };
        return Err(CallError::Rpc { code, message });
    }
    frame
        .remove("result")
        .ok_or_else(|| CallError::Malformed("an answer with neither result nor error".into()))
}

/// Parses a `NotifyStatus`, `NotifyFullStatus` or `NotifyEvent` frame; anything else is `None`.
pub fn parse_notification(frame: &Map<String, Value>) -> Option<Notification> {
    let method = frame.get("method")?.as_str()?;
    let Some(Value::Object(params)) = frame.get("params") else {
        return None;
    };
    let ts = params.get("ts").and_then(Value::as_f64);
    let components = || {
        params
            .iter()
            .filter(|(k, v)| k.as_str() != "ts" && v.is_object())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Map<_, _>>()
    };
    match method {
        "NotifyStatus" => Some(Notification::Status {
            ts,
            components: components(),
        }),
        "NotifyFullStatus" => Some(Notification::FullStatus {
            ts,
            status: components(),
        }),
        "NotifyEvent" => {
            let events = params
                .get("events")?
                .as_array()?
                .iter()
                .filter_map(parse_event)
                .take(MAX_EVENTS)
                .collect();
            Some(Notification::Event { ts, events })
        }
        _ => None,
    }
}

fn parse_event(v: &Value) -> Option<Event> {
    let o = v.as_object()?;
    let text = |k: &str| o.get(k)?.as_str().map(|s| crate::text::clip(s, 64));
    let fields = o
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "component" | "id" | "event" | "ts"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Event {
        component: text("component")?,
        id: o.get("id").and_then(Value::as_u64),
        event: text("event")?,
        ts: o.get("ts").and_then(Value::as_f64),
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn notifications_parse_into_their_kinds() {
        let status = obj(json!({"src": "d", "dst": "me", "method": "NotifyStatus",
            "params": {"ts": 1.5, "switch:0": {"id": 0, "output": true}}}));
        let Some(Notification::Status { ts, components }) = parse_notification(&status) else {
            panic!("not a status");
        };
        assert_eq!(ts, Some(1.5));
        assert_eq!(components["switch:0"]["output"], json!(true));
        let event = obj(
            json!({"method": "NotifyEvent", "params": {"ts": 2.0, "events": [
            {"component": "input:0", "id": 0, "event": "single_push", "ts": 2.0},
            {"component": 5, "event": "x"},
            {"component": "sys", "event": "scheduled_restart", "time_ms": 900}]}}),
        );
        let Some(Notification::Event { events, .. }) = parse_notification(&event) else {
            panic!("not an event");
        };
        assert_eq!(events.len(), 2, "the malformed one is skipped");
        assert_eq!(
            (events[0].id, events[0].event.as_str()),
            (Some(0), "single_push")
        );
        assert_eq!(
            (events[1].id, events[1].fields["time_ms"].clone()),
            (None, json!(900))
        );
        let full = obj(json!({"method": "NotifyFullStatus", "params": {"ts": 3, "sys": {}}}));
        assert!(matches!(
            parse_notification(&full),
            Some(Notification::FullStatus { .. })
        ));
        assert_eq!(
            parse_notification(&obj(json!({"method": "Other", "params": {}}))),
            None
        );
        assert_eq!(
            parse_notification(&obj(json!({"method": "NotifyEvent", "params": []}))),
            None
        );
    }

    #[test]
    fn frame_challenges_and_the_auth_object() {
        let ch = parse_challenge(
            r#"{"auth_type": "digest", "nonce": 1625038762, "nc": 1, "realm": "shellyplus1-a8032ab12345", "algorithm": "SHA-256"}"#,
        )
        .unwrap();
        assert_eq!(ch.nonce, json!(1625038762));
        let a = auth_object(&ch, "secret", 1, "313273957");
        let ha1 = digest::hash(Algorithm::Sha256, "admin:shellyplus1-a8032ab12345:secret");
        let ha2 = digest::hash(Algorithm::Sha256, "dummy_method:dummy_uri");
        let want = digest::hash(
            Algorithm::Sha256,
            &format!("{ha1}:1625038762:1:313273957:auth:{ha2}"),
        );
        assert_eq!(a["response"], json!(want));
        assert_eq!(a["nonce"], json!(1625038762), "echoed as a number");
        assert_eq!(a["username"], json!("admin"));
        assert!(parse_challenge(r#"{"auth_type": "basic", "nonce": 1, "realm": "r"}"#).is_none());
        assert!(
            parse_challenge(
                r#"{"auth_type": "digest", "nonce": 1, "realm": "r", "algorithm": "SHA-1"}"#
            )
            .is_none()
        );
        assert!(parse_challenge("not json").is_none());
    }
}
