//! Turns one HTTP request into a webhook, or into the status that rejects it. Pure: no sockets, no state.

use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::event::KNOWN_EVENTS;

/// Largest body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// The parts of a request the listener looks at.
pub(crate) struct Incoming<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// Path and query as sent.
    pub target: &'a str,
    /// The body (at most `MAX_BODY + 1` bytes read).
    pub body: &'a [u8],
    /// The sender's address.
    pub source: IpAddr,
}

/// What the listener enforces.
pub(crate) struct Rules<'a> {
    /// The configured path.
    pub path: &'a str,
    /// The shared secret, if any.
    pub token: Option<&'a str>,
    /// Addresses allowed to send, or `None` for any.
    pub allowed: Option<&'a [IpAddr]>,
}

/// A valid webhook request.
#[derive(Debug, PartialEq)]
pub(crate) struct Hook {
    /// Event name.
    pub event: String,
    /// `DeviceID`, when given.
    pub device_id: Option<i64>,
    /// `ObjectType`, when given.
    pub object_type: Option<String>,
    /// `ComponentID`, when given.
    pub component_id: Option<i64>,
    /// Every other field.
    pub params: Map<String, Value>,
}

/// Why a request is refused: HTTP status and a short reason (never containing the token).
#[derive(Debug, PartialEq)]
pub(crate) struct Rejected {
    pub status: u16,
    pub reason: String,
}

fn reject(status: u16, reason: impl Into<String>) -> Rejected {
    Rejected {
        status,
        reason: reason.into(),
    }
}

/// Compares without an early exit, so timing does not reveal how much of a guess was right.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff));
    }
    diff == 0
}

/// Fields from the query string and the body (JSON object or form), in order; the first occurrence wins.
fn fields(query: &str, body: &[u8]) -> Result<Vec<(String, Value)>, Rejected> {
    let mut out: Vec<(String, Value)> = crate::url::query_pairs(query)
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let text = std::str::from_utf8(body).map_err(|_| reject(400, "the body is not UTF-8"))?;
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        match crate::untrusted_json::parse(trimmed.as_bytes()) {
            Ok(Value::Object(m)) => out.extend(m),
            _ => return Err(reject(400, "the body is not a JSON object")),
        }
    } else if !trimmed.is_empty() {
        out.extend(
            crate::url::query_pairs(trimmed)
                .into_iter()
                .map(|(k, v)| (k, Value::String(v))),
        );
    }
    Ok(out)
}

fn integer(v: &Value, name: &str) -> Result<i64, Rejected> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| reject(400, format!("{name} must be a whole number")))
}

/// Checks a request against the rules, in this order: path (404), method (405), sender (403), size (413),
/// token (401), fields (400).
pub(crate) fn parse(req: &Incoming, rules: &Rules) -> Result<Hook, Rejected> {
    let (path, query) = req.target.split_once('?').unwrap_or((req.target, ""));
    if path != rules.path {
        return Err(reject(404, "unknown path"));
    }
    if req.method != "GET" && req.method != "POST" {
        return Err(reject(405, "use GET or POST"));
    }
    if let Some(allowed) = rules.allowed
        && !allowed.contains(&req.source)
    {
        return Err(reject(403, "sender is not a configured device"));
    }
    if req.body.len() > MAX_BODY {
        return Err(reject(413, "body larger than 64 KiB"));
    }
    let mut all = fields(query, req.body)?;
    let mut take = |name: &str| -> Option<Value> {
        let pos = all.iter().position(|(k, _)| k.eq_ignore_ascii_case(name))?;
        let (_, v) = all.remove(pos);
        // Later duplicates of a known field are dropped, not passed on as params.
        all.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        Some(v)
    };
    let token = take("token");
    if let Some(want) = rules.token {
        let given = token.as_ref().and_then(Value::as_str).unwrap_or("");
        if !same_secret(given, want) {
            return Err(reject(401, "missing or wrong token"));
        }
    }
    let event = match take("Event") {
        Some(Value::String(e)) if KNOWN_EVENTS.contains(&e.as_str()) => e,
        Some(Value::String(e)) => {
            // Quoted and escaped: the name came decoded from the request and may hold CR, LF or NUL.
            return Err(reject(
                400,
                format!(
                    "unknown event {}; see the README for the event names",
                    crate::text::quote(&e, 80)
                ),
            ));
        }
        Some(_) => return Err(reject(400, "Event must be a string")),
        None => return Err(reject(400, "Event is missing")),
    };
    let device_id = take("DeviceID")
        .map(|v| integer(&v, "DeviceID"))
        .transpose()?;
    let component_id = take("ComponentID")
        .map(|v| integer(&v, "ComponentID"))
        .transpose()?;
    let object_type = match take("ObjectType") {
        Some(Value::String(t)) => Some(t),
        Some(_) => return Err(reject(400, "ObjectType must be a string")),
        None => None,
    };
    let mut params = Map::new();
    for (k, v) in all {
        params.entry(k).or_insert(v);
    }
    Ok(Hook {
        event,
        device_id,
        object_type,
        component_id,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn run(method: &str, target: &str, body: &str, token: Option<&str>) -> Result<Hook, Rejected> {
        let req = Incoming {
            method,
            target,
            body: body.as_bytes(),
            source: LOCAL,
        };
        parse(
            &req,
            &Rules {
                path: "/hook",
                token,
                allowed: None,
            },
        )
    }

    #[test]
    fn get_query_post_json_and_post_form_give_the_same_hook() {
        let q = run(
            "GET",
            "/hook?Event=switch.on&DeviceID=2&ObjectType=output&ComponentID=5&x=1",
            "",
            None,
        )
        .unwrap();
        let j = run(
            "POST",
            "/hook",
            r#"{"Event":"switch.on","DeviceID":2,"ObjectType":"output","ComponentID":"5","x":"1"}"#,
            None,
        )
        .unwrap();
        let f = run(
            "POST",
            "/hook?Event=switch.on",
            "DeviceID=2&ObjectType=output&ComponentID=5&x=1",
            None,
        )
        .unwrap();
        assert_eq!(q, j);
        assert_eq!(q, f);
        assert_eq!(q.device_id, Some(2));
        assert_eq!(q.params["x"], "1");
    }

    #[test]
    fn every_rejection_has_its_status() {
        assert_eq!(
            run("GET", "/other?Event=switch.on", "", None)
                .unwrap_err()
                .status,
            404
        );
        assert_eq!(
            run("PUT", "/hook?Event=switch.on", "", None)
                .unwrap_err()
                .status,
            405
        );
        assert_eq!(run("GET", "/hook", "", None).unwrap_err().status, 400);
        assert_eq!(
            run("GET", "/hook?Event=switch.explode", "", None)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            run("GET", "/hook?Event=switch.on&DeviceID=abc", "", None)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            run("POST", "/hook", "{not json", None).unwrap_err().status,
            400
        );
        let big = format!("Event=switch.on&pad={}", "x".repeat(MAX_BODY));
        assert_eq!(run("POST", "/hook", &big, None).unwrap_err().status, 413);
        assert_eq!(
            run("GET", "/hook?Event=switch.on", "", Some("s3cret"))
                .unwrap_err()
                .status,
            401
        );
        assert_eq!(
            run(
                "GET",
                "/hook?Event=switch.on&token=s3cre",
                "",
                Some("s3cret")
            )
            .unwrap_err()
            .status,
            401
        );
        let ok = run(
            "GET",
            "/hook?Event=switch.on&token=s3cret",
            "",
            Some("s3cret"),
        )
        .unwrap();
        assert!(
            !ok.params.contains_key("token"),
            "the token never reaches the event"
        );
    }

    #[test]
    fn senders_outside_the_allowed_list_are_refused() {
        let other: IpAddr = "10.9.9.9".parse().unwrap();
        let req = Incoming {
            method: "GET",
            target: "/hook?Event=switch.on",
            body: b"",
            source: other,
        };
        let allowed = [LOCAL];
        let rules = Rules {
            path: "/hook",
            token: None,
            allowed: Some(&allowed),
        };
        assert_eq!(parse(&req, &rules).unwrap_err().status, 403);
    }

    #[test]
    fn secret_comparison() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }
}
