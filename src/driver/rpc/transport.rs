//! The RPC transport: framing a call (`{"id","method","params"}` → `result` or error) and the digest
//! authentication loop around `POST /rpc`.

use serde_json::{Value, json};

use super::Rpc;
use crate::driver::http::{Reply, Request};
use crate::driver::{AuthProblem, auth_error, digest};
use crate::error::{Error, Result};
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

    /// Calls one RPC method and returns its `result`.
    pub(super) fn call(
        &mut self,
        dev: &mut Device,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let mut frame = json!({"id": id, "src": "smartdev", "method": method});
        if let Some(p) = params {
            frame["params"] = p;
        }
        let reply = self.post(dev, &frame, &format!("RPC {method}"))?;
        parse_frame(reply, method).map_err(|e| match e {
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

/// Whether an RPC (named `RPC <method>`) may be sent again after a lost answer: reads and absolute sets may;
/// anything else (a `Webhook.Create`, a `Switch.Toggle`) gets one attempt, so it never happens twice.
pub(super) fn idempotent(what: &str) -> bool {
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

/// Takes the `result` out of an RPC answer frame, or its error.
pub(crate) fn parse_frame(
    mut frame: Value,
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
