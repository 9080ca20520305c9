//! The admin HTTP endpoint: the emulator's controls for other processes, JSON in answers.
//!
//! `GET /devices`; per device `/devices/<i>/...`: `POST fault?kind=..&ms=..`, `POST latency?ms=`,
//! `GET counts`, `DELETE counts`, `POST input|output?id=&state=`, `POST load?id=&watts=`,
//! `POST probe?id=[&celsius=]`, `POST temperature?celsius=`, `POST fire?event=&id=`, `GET webhooks`,
//! `POST password[?value=P]` (no or an empty value: auth off), `GET auth` (the auth counters).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Fault;
use super::device::Device;
use super::server::{Request, Response, Service};

type Failure = (u16, String);

fn bad(msg: impl Into<String>) -> Failure {
    (400, msg.into())
}

pub(crate) struct Admin {
    devices: Arc<Vec<Arc<Device>>>,
}

impl Admin {
    pub(crate) fn new(devices: Arc<Vec<Arc<Device>>>) -> Self {
        Admin { devices }
    }

    fn device(&self, index: &str) -> Result<&Device, Failure> {
        index
            .parse::<usize>()
            .ok()
            .and_then(|i| self.devices.get(i))
            .map(|d| &**d)
            .ok_or_else(|| (404, format!("no device '{index}'")))
    }

    fn route(&self, req: &Request) -> Result<Value, Failure> {
        let parts: Vec<&str> = req.path.trim_matches('/').split('/').collect();
        match parts.as_slice() {
            ["devices"] => {
                method(req, "GET")?;
                Ok(Value::Array(
                    self.devices.iter().map(|d| summary(d)).collect(),
                ))
            }
            ["devices", i] => {
                method(req, "GET")?;
                Ok(summary(self.device(i)?))
            }
            ["devices", i, action] => {
                let dev = self.device(i)?;
                device_action(dev, action, req)
            }
            _ => Err((404, format!("no endpoint {}", req.path))),
        }
    }
}

impl Service for Admin {
    fn key(&self, req: &Request) -> String {
        format!("{} {}", req.method, req.path)
    }

    fn handle(&self, req: &Request) -> Response {
        match self.route(req) {
            Ok(v) => Response::json(200, &v),
            Err((status, msg)) => Response::json(status, &json!({ "error": msg })),
        }
    }
}

fn summary(d: &Device) -> Value {
    json!({"index": d.index, "model": d.ident.info.model, "port": d.port, "id": d.ident.id})
}

fn method(req: &Request, want: &str) -> Result<(), Failure> {
    if req.method == want {
        Ok(())
    } else {
        Err((405, format!("use {want} for {}", req.path)))
    }
}

fn param(req: &Request, name: &str) -> Result<String, Failure> {
    req.param(name)
        .ok_or_else(|| bad(format!("missing parameter '{name}'")))
}

fn parsed<T: std::str::FromStr>(req: &Request, name: &str) -> Result<T, Failure> {
    let v = param(req, name)?;
    v.parse()
        .map_err(|_| bad(format!("parameter '{name}': '{v}' is not valid")))
}

fn number(req: &Request, name: &str) -> Result<f64, Failure> {
    let v: f64 = parsed(req, name)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(bad(format!("parameter '{name}' must be finite")))
    }
}

fn fault(req: &Request) -> Result<Fault, Failure> {
    let kind = param(req, "kind")?;
    Ok(match kind.as_str() {
        "none" => Fault::None,
        "blackhole" => Fault::Blackhole,
        "refuse" => Fault::Refuse,
        "http500" => Fault::Http500,
        "malformed" => Fault::MalformedJson,
        "truncated" => Fault::TruncatedBody,
        "flapping" => {
            let ms: u64 = parsed(req, "ms")?;
            if ms == 0 {
                return Err(bad("parameter 'ms' must be at least 1"));
            }
            Fault::Flapping(Duration::from_millis(ms))
        }
        other => {
            return Err(bad(format!(
                "unknown fault kind '{other}'; use none, blackhole, refuse, http500, malformed, truncated or flapping"
            )));
        }
    })
}

fn device_action(dev: &Device, action: &str, req: &Request) -> Result<Value, Failure> {
    let ok = json!({"ok": true});
    match (action, req.method.as_str()) {
        ("counts", "GET") => Ok(json!(dev.counts())),
        ("counts", "DELETE") => {
            dev.net.reset_counts();
            Ok(ok)
        }
        ("webhooks", "GET") => Ok(Value::Array(dev.webhooks())),
        ("fault", "POST") => {
            dev.set_fault(fault(req)?);
            Ok(ok)
        }
        ("latency", "POST") => {
            dev.set_latency(Duration::from_millis(parsed(req, "ms")?));
            Ok(ok)
        }
        ("input", "POST") => {
            dev.set_input(parsed(req, "id")?, parsed(req, "state")?)
                .map_err(bad)?;
            Ok(ok)
        }
        ("output", "POST") => {
            dev.set_output(parsed(req, "id")?, parsed(req, "state")?)
                .map_err(bad)?;
            Ok(ok)
        }
        ("load", "POST") => {
            dev.set_load(parsed(req, "id")?, number(req, "watts")?)
                .map_err(bad)?;
            Ok(ok)
        }
        ("probe", "POST") => {
            let celsius = match req.param("celsius") {
                None => None,
                Some(_) => Some(number(req, "celsius")?),
            };
            dev.set_probe(parsed(req, "id")?, celsius).map_err(bad)?;
            Ok(ok)
        }
        ("temperature", "POST") => {
            dev.set_temperature(number(req, "celsius")?).map_err(bad)?;
            Ok(ok)
        }
        ("password", "POST") => {
            let value = req.param("value").filter(|v| !v.is_empty());
            dev.auth.set_password(value.as_deref());
            Ok(json!({"ok": true, "auth": value.is_some()}))
        }
        ("auth", "GET") => {
            let s = dev.auth.stats();
            Ok(json!({
                "enabled": dev.auth.enabled(),
                "challenges": s.challenges,
                "accepted": s.accepted,
                "rejected": s.rejected,
                "stale": s.stale,
                "throttled": s.throttled,
                "nonces_in_use": s.nonces_in_use,
            }))
        }
        ("fire", "POST") => {
            let event = param(req, "event")?;
            Ok(json!({"called": dev.fire_event(&event, parsed(req, "id")?)}))
        }
        (
            "counts" | "webhooks" | "fault" | "latency" | "input" | "output" | "load" | "probe"
            | "temperature" | "fire" | "password" | "auth",
            m,
        ) => Err((405, format!("{m} is not allowed on {}", req.path))),
        _ => Err((404, format!("no endpoint {}", req.path))),
    }
}
