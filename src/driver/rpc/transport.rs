//! The RPC transport: framing a call (`{"id","method","params"}` → `result` or error) and the digest
//! authentication loop around `POST /rpc`.

use serde_json::{Map, Value, json};

use super::{Rpc, StatusDoc};
use crate::driver::http::{Reply, Request};
use crate::driver::ws::rpc::{BUSY, BUSY_CODE, FrameChallenge, auth_object, parse_challenge};
use crate::driver::ws::tunnel::{Sent, Tunnel};
use crate::driver::{AuthProblem, auth_error, digest};
use crate::error::{Error, Result, attempts_text};
use crate::objects::Device;

impl Rpc {
    /// Posts a frame, answering digest challenges: the cached nonce is tried first; a challenge is answered
    /// once; `stale=true` means "take the new nonce", not a wrong password.
    pub(super) fn post(&mut self, dev: &mut Device, frame: &Value, what: &str) -> Result<Value> {
        let url = format!("{}/rpc", self.base);
        // Whether the nonce in hand came from a challenge to this very call.
        let mut fresh = false;
        for _ in 0..3 {
            let mut headers = Vec::new();
            if let (Some(pw), Some((ch, nc))) = (&self.credentials.password, &mut self.nonce) {
                *nc += 1;
                let value = digest::authorization(
                    ch,
                    "admin",
                    pw.expose(),
                    "POST",
                    "/rpc",
                    *nc,
                    &digest::cnonce(),
                );
                headers.push(("Authorization", value));
            }
            let req = Request {
                url: &url,
                body: Some(frame),
                what,
                headers,
                idempotent: idempotent(what),
                text: false,
            };
            match self.http.send(dev, &req)? {
                Reply::Json(v) => return Ok(v),
                Reply::Unauthorized(header) => {
                    if self.credentials.password.is_none() {
                        return Err(auth_error(dev, what, AuthProblem::Missing { user: false }));
                    }
                    let Some(ch) = header.as_deref().and_then(digest::parse_challenge) else {
                        return Err(auth_error(dev, what, AuthProblem::NoChallenge));
                    };
                    if fresh && !ch.stale {
                        self.nonce = None;
                        return Err(auth_error(dev, what, AuthProblem::Refused { user: false }));
                    }
                    fresh = true;
                    self.nonce = Some((ch, 0));
                }
            }
        }
        Err(auth_error(dev, what, AuthProblem::KeptAsking))
    }

    /// The call's answer frame: over the live push connection, else over HTTP (to the device's own MAC
    /// only, for a command that could not use its push connection).
    fn send_call(
        &mut self,
        dev: &mut Device,
        method: &str,
        params: Option<Value>,
        what: &str,
    ) -> Result<Value> {
        if self.mqtt.is_some() {
            return self.call_mqtt(dev, method, params, what);
        }
        match self.call_tunnel(dev, method, params.as_ref(), what)? {
            Some(frame) => Ok(frame),
            None => self.send_over_http(dev, method, params, what),
        }
    }

    /// [`Rpc::send_call`] without its push connection. Out of line: calls through the connection are the
    /// rule, and this path's frame would sit under each of them.
    #[inline(never)]
    fn send_over_http(
        &mut self,
        dev: &mut Device,
        method: &str,
        params: Option<Value>,
        what: &str,
    ) -> Result<Value> {
        // A live push connection proves who is at the address; without it (down, or it broke under this very
        // command) a command goes over HTTP only to the device's own MAC: two devices that swapped addresses
        // must not get each other's commands.
        if actuates(what) && self.tunnel.is_some() && !self.http.closing() {
            self.confirm_mac(dev, what)?;
        }
        let frame = self.http_frame(method, params);
        self.post(dev, &frame, what)
    }

    /// Calls one RPC method and returns its `result`.
    pub(super) fn call(
        &mut self,
        dev: &mut Device,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value> {
        self.deep = true;
        self.addressed(dev)?;
        let what = format!("RPC {method}");
        let reply = self.send_call(dev, method, params, &what);
        if actuates(&what)
            && let Some(t) = &self.tunnel
        {
            // A status the subscription read before this command's answer may be older than what it did
            // (the device may have read it first even if it was asked later): not taken as the next read.
            t.reading();
        }
        let reply = reply?;
        self.result(dev, method, reply)
    }

    /// Calls one RPC method over HTTP, never through the push connection, and returns its `result`: for a
    /// request whose answer must not go down with the sockets a device closes right after (`Shelly.Update`).
    /// Over MQTT (no HTTP), through the broker: the broker keeps no socket of the device's.
    pub(super) fn call_http(
        &mut self,
        dev: &mut Device,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value> {
        if self.mqtt.is_some() {
            return self.call(dev, method, params);
        }
        self.deep = true;
        let frame = self.http_frame(method, params);
        let reply = self.post(dev, &frame, &format!("RPC {method}"))?;
        self.result(dev, method, reply)
    }

    /// A request frame to POST, with the next id.
    fn http_frame(&mut self, method: &str, params: Option<Value>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"id": id, "src": "smartdev", "method": method});
        if let Some(p) = params {
            frame["params"] = p;
        }
        frame
    }

    /// The `result` of an answer frame, or the device's error as ours.
    fn result(&self, dev: &Device, method: &str, mut reply: Value) -> Result<Value> {
        let taken = parse_frame(&mut reply, method);
        // The rest of the frame (its id, src, dst): the poller parsed it, the poller frees it.
        self.give_back(reply);
        taken.map_err(|e| match e {
            FrameError::Rpc(401, _) => auth_error(
                dev,
                &format!("RPC {method}"),
                AuthProblem::Refused { user: false },
            ),
            FrameError::Rpc(code, message) => Error::Rpc {
                device: dev.label(),
                method: method.to_string(),
                code,
                message,
            },
            FrameError::Malformed(m) => Error::Device {
                device: dev.label(),
                message: format!("RPC {method}: {m}"),
            },
        })
    }
}

impl Rpc {
    /// A call through the broker (`Channel: mqtt`) with the HTTP rules: `ResponseTimeout` per attempt, and
    /// only idempotent calls tried again (`RetryCount`, `RetryDelay`). A device the broker cannot reach now
    /// (connection down, last will) fails at once with the reason.
    fn call_mqtt(
        &mut self,
        dev: &mut Device,
        method: &str,
        params: Option<Value>,
        what: &str,
    ) -> Result<Value> {
        let Some(port) = self.mqtt.clone() else {
            return Err(Error::Closed);
        };
        let attempts = self.http.attempts();
        let mut n = 0;
        loop {
            n += 1;
            if let Some(why) = port.unavailable() {
                self.http.record_reach(false);
                return Err(Error::Device {
                    device: dev.label(),
                    message: format!("{what}: {why}"),
                });
            }
            // `None`: lost (idempotent: may be asked again), or the connection went down meanwhile.
            if let Some(frame) = self.call_tunnel(dev, method, params.as_ref(), what)? {
                return Ok(frame);
            }
            if n >= attempts || self.http.closing() || !self.http.pause() {
                break;
            }
        }
        self.http.record_reach(false);
        Err(match port.unavailable() {
            Some(why) => Error::Device {
                device: dev.label(),
                message: format!("{what}: {why}"),
            },
            None => Error::Timeout {
                device: dev.label(),
                request: format!("{what} over MQTT"),
                attempts: n,
            },
        })
    }

    /// Sends the call over the device's push connection when it is up: `Some(answer frame)`, or `None` to
    /// use HTTP (no connection; or an idempotent call whose answer was lost, which HTTP then repeats under
    /// its retry policy). A call that may have run (not idempotent) and got no answer is not repeated.
    /// In-frame digest: the challenge in hand (the connector's, then each new one) with a rising count; a 429
    /// (no free nonce slot) is sent again after `RetryDelay`, up to `RetryCount` times.
    fn call_tunnel(
        &mut self,
        dev: &Device,
        method: &str,
        params: Option<&Value>,
        what: &str,
    ) -> Result<Option<Value>> {
        // Only a status read is answered typed.
        Ok(
            match self.tunnel_call(dev, method, params, what, Ask::Call)? {
                Some(Got::Frame(frame)) => Some(frame),
                Some(Got::Status(_)) | None => None,
            },
        )
    }

    /// Reads `Shelly.GetStatus`. Over the push connection the poller reads the answer straight into a
    /// [`StatusDoc`]; an answer from elsewhere (HTTP, MQTT, an error frame) is read into one here.
    /// Boxed: the worker reads its status through a chain of calls, and a status held by value in one of their
    /// frames would sit under everything the read does below it (the deepest frame decides how much of every
    /// worker's stack stays resident).
    #[inline(never)]
    pub(super) fn read_status(
        &mut self,
        dev: &mut Device,
        first: Option<Sent>,
    ) -> Result<Box<StatusDoc>> {
        const METHOD: &str = "Shelly.GetStatus";
        const WHAT: &str = "RPC Shelly.GetStatus";
        if !self.has_address() {
            return Err(Self::no_address(dev));
        }
        let got = if self.mqtt.is_some() {
            None
        } else {
            self.tunnel_call(dev, METHOD, None, WHAT, Ask::Status(first))?
        };
        match got {
            Some(Got::Status(doc)) => Ok(doc),
            got => self.status_otherwise(dev, got),
        }
    }

    /// The answer to the read sent before the worker ran (`Rpc::read_sent`), if there is one: the status, or
    /// (`Err`) what came instead, which is then the read's first send (sent again if a request of the
    /// driver's went out in its place). Awaited before `read_status` is entered, in a small frame: the wait is
    /// the deepest point of a read.
    #[inline(never)]
    pub(super) fn pre_read_answer(&mut self) -> std::result::Result<Box<StatusDoc>, Option<Sent>> {
        let pre = self.pre_read.take().filter(|_| !self.http.closing());
        let Some((pre, t)) = pre.zip(self.tunnel.as_ref()) else {
            return Err(None);
        };
        match t.await_pre_read(pre, self.http.timeout()) {
            Some(Sent::Status(doc)) => {
                self.http.record_reach(true);
                Ok(doc)
            }
            other => Err(other),
        }
    }

    /// A status read that did not come typed: the answer frame, or asked over MQTT or HTTP.
    #[inline(never)]
    fn status_otherwise(&mut self, dev: &mut Device, got: Option<Got>) -> Result<Box<StatusDoc>> {
        const METHOD: &str = "Shelly.GetStatus";
        let status = match got {
            _ if self.mqtt.is_some() => self.call(dev, METHOD, None)?,
            Some(Got::Status(doc)) => return Ok(doc),
            Some(Got::Frame(frame)) => self.result(dev, METHOD, frame)?,
            None => self.call_http(dev, METHOD, None)?,
        };
        let doc = Box::new(StatusDoc::from_value(&status));
        self.give_back(status);
        Ok(doc)
    }

    /// A request whose answer never came: asked again elsewhere when it cannot have moved anything, else an
    /// error (it may have run).
    #[cold]
    #[inline(never)]
    fn lost(&mut self, dev: &Device, what: &str, why: &str) -> Result<Option<Got>> {
        if idempotent(what) {
            let then = if self.mqtt.is_some() {
                "asked again"
            } else {
                "over HTTP"
            };
            log::debug!("device {}: {what}: {why}; {then}", dev.label());
            return Ok(None);
        }
        self.http.record_reach(false);
        Err(Error::Device {
            device: dev.label(),
            message: format!(
                "{what}: {why}; not sent again, as it may have run: read the device to see"
            ),
        })
    }

    /// A request refused before it ran: a 429 (`busy`), waited out under the HTTP retry policy, as the device
    /// ran nothing and any call, a toggle too, is safe to send again; or a challenge, answered with the
    /// password. `Ok`: send again.
    #[cold]
    #[inline(never)]
    fn refused(
        &mut self,
        dev: &Device,
        what: &str,
        tunnel: &Tunnel,
        frame: &Map<String, Value>,
        busy: bool,
        tries: Tries<'_>,
    ) -> Result<()> {
        if busy {
            *tries.busy += 1;
            let n = *tries.busy;
            log::debug!(
                "device {}: {what}: 429 over the WebSocket ({n}/{})",
                dev.label(),
                self.http.attempts()
            );
            if n >= self.http.attempts() || self.http.closing() || !self.http.pause() {
                return Err(Error::Device {
                    device: dev.label(),
                    message: format!(
                        "{what}: {BUSY} (after {}); have fewer clients log in to it at once, or raise RetryCount or RetryDelay",
                        attempts_text(n)
                    ),
                });
            }
            return Ok(());
        }
        *tries.challenged += 1;
        if self.credentials.password.is_none() {
            return Err(auth_error(dev, what, AuthProblem::Missing { user: false }));
        }
        let challenge = frame
            .get("error")
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .and_then(|m| parse_challenge(&crate::text::clip(m, 1024)));
        let Some(ch) = challenge else {
            return Err(auth_error(dev, what, AuthProblem::NoChallenge));
        };
        if *tries.fresh {
            tunnel.forget_challenge();
            return Err(auth_error(dev, what, AuthProblem::Refused { user: false }));
        }
        *tries.fresh = true;
        tunnel.set_challenge(ch);
        Ok(())
    }

    /// [`Rpc::call_tunnel`], or a status read ([`Ask`]). The worker's every read goes through here: what it
    /// rarely needs (a lost answer, a challenge, a 429) is out of line, as the deepest frame decides how much
    /// of every worker's stack stays resident.
    fn tunnel_call(
        &mut self,
        dev: &Device,
        method: &str,
        params: Option<&Value>,
        what: &str,
        ask: Ask,
    ) -> Result<Option<Got>> {
        let (typed, mut first) = match ask {
            Ask::Status(first) => (true, first),
            Ask::Call => (false, None),
        };
        let Some(tunnel) = self.tunnel.clone() else {
            return Ok(None);
        };
        if self.http.closing() {
            return Ok(None);
        }
        let mut fresh = false;
        // Sends answered by a challenge (at most 3), and by a 429 (within the retry budget).
        let (mut challenged, mut busy) = (0, 0);
        while challenged < 3 {
            let password = self.credentials.password.as_ref();
            let sent = match first.take() {
                Some(sent) => sent,
                None => send_now(
                    &tunnel,
                    method,
                    params,
                    typed,
                    password,
                    self.http.timeout(),
                ),
            };
            match sent {
                Sent::Down => return Ok(None),
                Sent::Status(doc) => {
                    self.http.record_reach(true);
                    return Ok(Some(Got::Status(doc)));
                }
                Sent::Lost(why) => return self.lost(dev, what, &why),
                Sent::Answer(frame) => {
                    self.http.record_reach(true);
                    let code = frame
                        .get("error")
                        .filter(|e| !e.is_null())
                        .and_then(|e| e.get("code"))
                        .and_then(Value::as_i64);
                    // Firmware 2.x out of nonce slots (over the WebSocket only: device authentication does
                    // not apply to MQTT).
                    let busy_now = code == Some(BUSY_CODE) && self.mqtt.is_none();
                    if !busy_now && code != Some(401) {
                        return Ok(Some(Got::Frame(Value::Object(frame))));
                    }
                    let tries = Tries {
                        fresh: &mut fresh,
                        challenged: &mut challenged,
                        busy: &mut busy,
                    };
                    self.refused(dev, what, &tunnel, &frame, busy_now, tries)?;
                }
            }
        }
        Err(auth_error(dev, what, AuthProblem::KeptAsking))
    }
}

/// Sends a request through the push connection and waits for its answer; a status read (`typed`) may be
/// answered with a [`StatusDoc`]. Out of line: a read whose request was sent ahead never comes here, and the
/// request's encoding would otherwise sit in the frame under it.
#[inline(never)]
fn send_now(
    tunnel: &Tunnel,
    method: &str,
    params: Option<&Value>,
    typed: bool,
    password: Option<&crate::config::Secret>,
    timeout: std::time::Duration,
) -> Sent {
    let auth = |ch: &mut Option<(FrameChallenge, u32)>| {
        let (pw, (ch, nc)) = (password?, ch.as_mut()?);
        *nc += 1;
        Some(auth_object(ch, pw.expose(), *nc, &digest::cnonce()))
    };
    if typed {
        tunnel.request_status(auth, timeout)
    } else {
        tunnel.request(method, params, auth, timeout)
    }
}

/// What [`Rpc::tunnel_call`] asks.
enum Ask {
    /// A call, answered with its frame.
    Call,
    /// A status read, whose result may come as a [`StatusDoc`]; with what its first send met when the read
    /// was sent ahead (`Rpc::pre_read_answer`).
    Status(Option<Sent>),
}

/// What a request through the push connection has met so far.
struct Tries<'a> {
    /// A challenge was answered already.
    fresh: &'a mut bool,
    /// Sends answered by a challenge.
    challenged: &'a mut u32,
    /// Sends answered by a 429.
    busy: &'a mut u32,
}

/// An answer through the push connection.
enum Got {
    /// The answer frame.
    Frame(Value),
    /// A status read's result, read by the poller.
    Status(Box<StatusDoc>),
}

/// Whether an RPC (named `RPC <method>`) moves something: a switch, light or cover command (not a read,
/// not our webhooks' bookkeeping).
fn actuates(what: &str) -> bool {
    let Some((component, verb)) = what.trim_start_matches("RPC ").split_once('.') else {
        return false;
    };
    matches!(
        component,
        "Switch" | "Light" | "Cover" | "RGB" | "RGBW" | "CCT"
    ) && !verb.starts_with("Get")
        && !verb.starts_with("List")
}

impl Rpc {
    /// Before a command goes over HTTP after its push connection broke: the device at the address shows its
    /// MAC (`Shelly.GetDeviceInfo`), and another MAC than the device's gets nothing.
    fn confirm_mac(&mut self, dev: &mut Device, what: &str) -> Result<()> {
        let frame = self.http_frame("Shelly.GetDeviceInfo", None);
        let info = self.post(dev, &frame, "RPC Shelly.GetDeviceInfo")?;
        let seen = info
            .pointer("/result/mac")
            .and_then(Value::as_str)
            .and_then(|m| crate::mac::Mac::parse(m).ok());
        let known = dev
            .mac_address
            .as_deref()
            .and_then(|m| crate::mac::Mac::parse(m).ok());
        match (seen, known) {
            (Some(seen), Some(known)) if seen != known => {
                log::warn!(
                    "device {}: {what} not sent: without its push connection, {} answers as {seen}, not {known}",
                    dev.label(),
                    self.base
                );
                Err(Error::WrongDevice {
                    device: dev.label(),
                    address: self
                        .base
                        .trim_start_matches("http://")
                        .trim_start_matches("https://")
                        .to_string(),
                    expected: known.to_string(),
                    configured: false,
                    found: seen.to_string(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Whether an RPC (named `RPC <method>`) may be sent again after a lost answer: reads and absolute sets may;
/// anything else (a `Webhook.Create`, a `Switch.Toggle`) gets one attempt, so it never happens twice.
pub(super) fn idempotent(what: &str) -> bool {
    if what == "RPC Shelly.Update" {
        // Starts a firmware update: sent once, like every command that is not an absolute set.
        return false;
    }
    let verb = what.rsplit('.').next().unwrap_or("");
    verb.starts_with("Get")
        || verb.starts_with("List")
        || matches!(verb, "Set" | "Update" | "Delete")
}

/// Why an RPC answer frame is not a result.

#[derive(Debug, PartialEq)]
pub(crate) enum FrameError {
    /// The device's error object: code and message.
    Rpc(i64, String),
    /// Neither result nor error.
    Malformed(String),
}

/// Takes the `result` out of an RPC answer frame, or its error; the rest of the frame stays with its owner.
pub(crate) fn parse_frame(
    frame: &mut Value,
    method: &str,
) -> std::result::Result<Value, FrameError> {
    if let Some(err) = frame.get("error").filter(|e| !e.is_null()) {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        // The device's own words, kept to one short line.
        let message = crate::text::escape_controls(&crate::text::clip(message, 200)).into_owned();
        return Err(FrameError::Rpc(code, message));
    }
    // Taken, not cloned: status results are a few KiB and this runs on every call.
    // `Cover.Open`, `Light.Set` and friends answer `"result": null`: present is what counts.
    match frame.get_mut("result").map(Value::take) {
        Some(r) => Ok(r),
        None => Err(FrameError::Malformed(format!(
            "the answer to {method} has neither result nor error"
        ))),
    }
}
