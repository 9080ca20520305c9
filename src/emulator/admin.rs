//! The admin HTTP endpoint: the emulator's controls for other processes, JSON in answers.
//!
//! `GET /devices`; per device `/devices/<i>/...`: `POST fault?kind=..&ms=..`, `POST latency?ms=`,
//! `GET counts`, `DELETE counts`, `POST input|output?id=&state=`, `POST load?id=&watts=`,
//! `POST history?[backfill_s=S][&gap_from=T&gap_to=T]` (energy meters' records: S seconds of past at the present
//! load; none in a Unix-seconds range),
//! `POST probe?id=[&celsius=]`, `POST temperature?celsius=`, `POST fire?event=&id=`, `GET webhooks`,
//! `POST password[?value=P]` (no or an empty value: auth off), `GET auth` (the auth counters),
//! `GET|POST mac[?value=M]` (another device at the address: it reports MAC `M` from now on),
//! `GET|POST profile[?name=P]`, `GET cover?id=N`, `POST cover?id=N[&calibrated=B][&position=P]`,
//! `POST sensor?quantity=temperature|humidity|voltage&id=N[&value=V]` (no value: not answering),
//! `POST battery?percent=P`, `POST input_type?id=N&type=switch|button`,
//! `POST press?id=N[&kind=single|double|triple|long]`, `GET|POST light?id=N[&state=B&brightness=P&ct=K&rgb=RRGGBB&white=W]`,
//! `POST frequency?id=N&hz=F`, `GET ws` (open WebSocket connections), `POST ws?action=drop|stall|release|hold|answer`
//! (`hold`: upgrade requests from now on are left unanswered; `answer`: the held ones end),
//! `GET|POST announce[?on=true|false]` (the device's mDNS records; withdraw or restore its announcement),
//! `POST move[?address=A][&port=P]` (the device leaves its address for another, as after a DHCP lease change;
//! without a port it keeps its port at a new address, else takes a free one),
//! `GET mqtt` (the MQTT client: server, topic, client id, connected, connects, paused), `POST mqtt?action=drop|pause|resume`
//! (cut the broker connection without DISCONNECT, so the broker publishes the will, and reconnect after the
//! back-off; stay away; come back),
//! `GET|POST sleep[?action=wake|hold|release]` (a sleeping device: wake it now, hold it awake as its button
//! does, or let it sleep; answers its period, whether it is held, its outbound server and reports so far).
//! `GET|POST firmware[?version=V][&stable=V][&beta=V][&outcome=succeed|refuse|never|old|fail][&download_ms=N][&restart_ms=N]`
//! (the versions on offer, an empty one: none; how the next updates end; how long download and restart take).
//! `GET|POST cert[?ca=true][&expired=true][&names=A;B]` (HTTPS devices: the fingerprint served, or a new
//! certificate: self-signed or signed by the emulator's CA, `GET /ca`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use super::announce::Announcer;
use super::device::Device;
use super::server::{Request, Response, Service};
use super::{Fault, InputType, Press};
use crate::models::SensorQuantity;

type Failure = (u16, String);

/// `GET /devices/<i>/mqtt`: the MQTT client's state (the password is never shown).
fn mqtt_state(dev: &Device) -> Value {
    let m = &dev.mqtt;
    let spec = m.spec.as_ref();
    json!({
        "enabled": m.enabled(),
        "server": spec.map(|s| s.server.clone()),
        "topic": spec.map(|_| m.prefix.clone()),
        "client_id": m.client_id,
        "user": spec.and_then(|s| s.user.clone()),
        "tls": spec.is_some_and(|s| s.ca_file.is_some()),
        "connected": m.subscribed(),
        "connects": m.connects(),
        "paused": m.paused(),
    })
}

fn bad(msg: impl Into<String>) -> Failure {
    (400, msg.into())
}

pub(crate) struct Admin {
    devices: Arc<Vec<Arc<Device>>>,
    announcer: Arc<Announcer>,
    ca: OnceLock<Arc<super::CertAuthority>>,
}

impl Admin {
    pub(crate) fn new(devices: Arc<Vec<Arc<Device>>>, announcer: Arc<Announcer>) -> Self {
        Admin {
            devices,
            announcer,
            ca: OnceLock::new(),
        }
    }

    /// `GET|POST /devices/<i>/announce[?on=true|false]`: the device's mDNS records and whether it is announced.
    fn announce(&self, index: &str, req: &Request) -> Result<Value, Failure> {
        self.device(index)?;
        let i: usize = index.parse().map_err(|_| bad("device index"))?;
        if req.method == "POST" {
            let on = match req.param("on").as_deref() {
                Some("true" | "1" | "on") => true,
                Some("false" | "0" | "off") => false,
                other => {
                    return Err(bad(format!(
                        "announce needs on=true or on=false, not {:?}",
                        other.unwrap_or("nothing")
                    )));
                }
            };
            self.announcer.set(i, on).map_err(|e| (500, e))?;
        } else {
            method(req, "GET")?;
        }
        let records: Vec<Value> = self
            .announcer
            .records(i)
            .iter()
            .map(|r| {
                let txt: serde_json::Map<String, Value> = r
                    .txt
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v.as_deref().map(String::from_utf8_lossy))))
                    .collect();
                json!({"service": r.service, "instance": r.instance, "host": r.host,
                       "addresses": r.addresses, "port": r.port, "txt": txt})
            })
            .collect();
        Ok(json!({
            "announced": self.announcer.announced(i),
            "announcing": self.announcer.running(),
            "records": records,
        }))
    }

    /// `POST /devices/<i>/move[?address=A][&port=P]`: the device moves (see `Emulator::move_device`).
    fn relocate(&self, index: &str, req: &Request) -> Result<Value, Failure> {
        let dev = self.device(index)?;
        method(req, "POST")?;
        let ip = match req.param("address") {
            None => None,
            Some(a) => Some(a.parse::<std::net::IpAddr>().map_err(|_| {
                bad(format!(
                    "move: address {a:?} is not an IP address; e.g. address=127.0.0.2"
                ))
            })?),
        };
        let port = match req.param("port") {
            // A new address keeps the port, as a device given another lease does; else a free port.
            None if ip.is_some() => dev.port(),
            None => 0,
            Some(p) => p.parse::<u16>().map_err(|_| {
                bad(format!(
                    "move: port {p:?} is not a port (0 to 65535; 0 picks a free one)"
                ))
            })?,
        };
        let new = dev.relocate(ip, port).map_err(bad)?;
        self.announcer.refresh(dev.index).map_err(|e| (500, e))?;
        Ok(json!({"address": new.ip().to_string(), "port": new.port()}))
    }

    /// The emulator's own CA (made at the first use), which signs certificates with `cert?ca=true`.
    fn ca(&self) -> Arc<super::CertAuthority> {
        self.ca
            .get_or_init(|| Arc::new(super::CertAuthority::new("smartdev emulator CA")))
            .clone()
    }

    /// `GET cert`: the fingerprint served; `POST cert[?ca=true][&expired=true][&names=A;B]`: serve a new one.
    fn cert(&self, index: &str, req: &Request) -> Result<Value, Failure> {
        let dev = self.device(index)?;
        let tls = dev.tls.as_ref().ok_or_else(|| {
            bad(format!(
                "device {index} serves plain HTTP (start it with tls)"
            ))
        })?;
        if req.method == "GET" {
            return Ok(json!({"sha256": tls.fingerprint()}));
        }
        method(req, "POST")?;
        let flag = |k: &str| matches!(req.param(k).as_deref(), Some("true" | "1"));
        let spec = super::CertSpec {
            issuer: flag("ca").then(|| self.ca()),
            names: req
                .param("names")
                .map(|n| {
                    n.split(';')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            expired: flag("expired"),
        };
        let fp = tls.set(&spec).map_err(bad)?;
        dev.ws.drop_all();
        Ok(json!({"sha256": fp}))
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
            ["devices", i, "announce"] => self.announce(i, req),
            ["devices", i, "move"] => self.relocate(i, req),
            ["devices", i, "cert"] => self.cert(i, req),
            ["ca"] => {
                method(req, "GET")?;
                Ok(json!({"pem": self.ca().pem()}))
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
    json!({"index": d.index, "model": d.ident.info.model, "port": d.port(), "address": d.net.local().ip().to_string(), "id": d.ident.id})
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
        ("firmware", "GET" | "POST") => {
            super::firmware_api::admin(dev, req.method == "POST", &|k| req.param(k)).map_err(bad)
        }
        ("fault", "POST") => {
            dev.set_fault(fault(req)?);
            Ok(ok)
        }
        ("history", "POST") => {
            if req.param("backfill_s").is_some() {
                dev.backfill_history(parsed(req, "backfill_s")?)
                    .map_err(bad)?;
            }
            if req.param("gap_from").is_some() {
                dev.set_history_gap(parsed(req, "gap_from")?, parsed(req, "gap_to")?)
                    .map_err(bad)?;
            }
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
        ("mac", "GET") => Ok(json!({"mac": dev.mac_colon()})),
        ("mac", "POST") => {
            let mac = crate::mac::Mac::parse(&param(req, "value")?).map_err(bad)?;
            dev.set_mac(mac);
            Ok(json!({"mac": dev.mac_colon()}))
        }
        ("mqtt", "GET") => Ok(mqtt_state(dev)),
        ("mqtt", "POST") => {
            match param(req, "action")?.as_str() {
                "drop" => dev.mqtt.drop_connection(),
                "pause" => dev.mqtt.set_paused(true),
                "resume" => dev.mqtt.set_paused(false),
                other => {
                    return Err(bad(format!(
                        "mqtt action '{other}' is not drop, pause or resume"
                    )));
                }
            }
            Ok(mqtt_state(dev))
        }
        ("ws", "GET") => Ok(json!({"connections": dev.ws.connections()})),
        ("ws", "POST") => {
            match param(req, "action")?.as_str() {
                "drop" => dev.ws.drop_all(),
                "stall" => dev.ws.set_stalled(true),
                "release" => dev.ws.set_stalled(false),
                "hold" => dev.ws.set_hold_upgrades(true),
                "answer" => dev.ws.set_hold_upgrades(false),
                other => {
                    return Err(bad(format!(
                        "unknown ws action '{other}' (drop, stall, release, hold, answer)"
                    )));
                }
            }
            Ok(json!({"connections": dev.ws.connections()}))
        }
        ("sleep", "GET") => Ok(sleep_state(dev)),
        ("sleep", "POST") => {
            if dev.ws_out.period.is_none() {
                return Err(bad(
                    "this device does not sleep (DeviceSpec::sleep, sleep=SECONDS)",
                ));
            }
            match param(req, "action")?.as_str() {
                "wake" => {
                    super::sleeper::wake(dev);
                }
                "hold" => super::sleeper::set_awake(dev, true),
                "release" => super::sleeper::set_awake(dev, false),
                other => {
                    return Err(bad(format!(
                        "unknown sleep action '{other}' (wake, hold, release)"
                    )));
                }
            }
            Ok(sleep_state(dev))
        }
        ("fire", "POST") => {
            let event = param(req, "event")?;
            Ok(json!({"called": dev.fire_event(&event, parsed(req, "id")?)}))
        }
        (
            "profile" | "cover" | "sensor" | "battery" | "input_type" | "press" | "light"
            | "frequency",
            _,
        ) => component_action(dev, action, req),
        (
            "counts" | "webhooks" | "fault" | "latency" | "input" | "output" | "load" | "probe"
            | "temperature" | "fire" | "password" | "auth" | "mac" | "ws" | "sleep",
            m,
        ) => Err((405, format!("{m} is not allowed on {}", req.path))),
        _ => Err((404, format!("no endpoint {}", req.path))),
    }
}

/// A sleeping device's schedule and reports (`GET`/`POST /devices/N/sleep`).
fn sleep_state(dev: &Device) -> Value {
    json!({
        "period": dev.ws_out.period.map(|p| p.as_secs()),
        "held_awake": dev.ws_out.held(),
        "server": dev.ws_out.server(),
        "reports": dev.ws_out.reports(),
    })
}

fn not_allowed(req: &Request) -> Failure {
    (
        405,
        format!("{} is not allowed on {}", req.method, req.path),
    )
}

/// Profile, cover, sensor, input, light and meter-frequency controls.
fn component_action(dev: &Device, action: &str, req: &Request) -> Result<Value, Failure> {
    let ok = json!({"ok": true});
    let get = req.method == "GET";
    if !get && req.method != "POST" {
        return Err(not_allowed(req));
    }
    match action {
        "profile" => {
            if !get {
                dev.set_profile(&param(req, "name")?).map_err(bad)?;
            }
            Ok(json!({"profile": dev.profile()}))
        }
        "cover" => {
            let id = parsed(req, "id")?;
            if !get {
                if req.param("calibrated").is_some() {
                    dev.set_cover_calibrated(id, parsed(req, "calibrated")?)
                        .map_err(bad)?;
                }
                if req.param("position").is_some() {
                    dev.set_cover_position(id, number(req, "position")?)
                        .map_err(bad)?;
                }
            }
            let c = dev.cover(id).map_err(bad)?;
            Ok(json!({
                "state": c.state.as_str(),
                "position": c.position,
                "target": c.target,
                "calibrated": c.calibrated,
            }))
        }
        _ if get && action != "light" => Err(not_allowed(req)),
        "sensor" => {
            let q: SensorQuantity = param(req, "quantity")?
                .parse()
                .map_err(|e: crate::Error| bad(e.to_string()))?;
            let value = match req.param("value") {
                None => None,
                Some(_) => Some(number(req, "value")?),
            };
            dev.set_sensor(q, parsed(req, "id")?, value).map_err(bad)?;
            Ok(ok)
        }
        "battery" => {
            dev.set_battery(number(req, "percent")?).map_err(bad)?;
            Ok(ok)
        }
        "input_type" => {
            let t = match param(req, "type")?.as_str() {
                "switch" => InputType::Switch,
                "button" => InputType::Button,
                other => {
                    return Err(bad(format!(
                        "input type '{other}' is unknown; use switch or button"
                    )));
                }
            };
            dev.set_input_type(parsed(req, "id")?, t).map_err(bad)?;
            Ok(ok)
        }
        "press" => {
            let kind = match req.param("kind").as_deref().unwrap_or("single") {
                "single" => Press::Single,
                "double" => Press::Double,
                "triple" => Press::Triple,
                "long" => Press::Long,
                other => {
                    return Err(bad(format!(
                        "press kind '{other}' is unknown; use single, double, triple or long"
                    )));
                }
            };
            let called = dev.press(parsed(req, "id")?, kind).map_err(bad)?;
            Ok(json!({"called": called}))
        }
        "light" => {
            let id = parsed(req, "id")?;
            if !get {
                let (on, brightness) = dev.light(id).map_err(bad)?;
                let on = match req.param("state") {
                    None => on,
                    Some(_) => parsed(req, "state")?,
                };
                let brightness = match req.param("brightness") {
                    None => brightness,
                    Some(_) => parsed(req, "brightness")?,
                };
                dev.set_light(id, on, brightness).map_err(bad)?;
                let ct = match req.param("ct") {
                    None => None,
                    Some(_) => Some(parsed(req, "ct")?),
                };
                let rgb = match req.param("rgb") {
                    None => None,
                    Some(t) => Some(crate::light::parse_rgb(&t).map_err(|e| bad(e.to_string()))?),
                };
                let white = match req.param("white") {
                    None => None,
                    Some(_) => Some(parsed(req, "white")?),
                };
                dev.set_light_color(id, ct, rgb, white).map_err(bad)?;
            }
            let (on, brightness) = dev.light(id).map_err(bad)?;
            let (ct, rgb, white) = dev.light_color(id).map_err(bad)?;
            // The colour parts the light has.
            let caps = dev.state().layout.light.unwrap_or_default();
            let mut v = json!({"state": on, "brightness": brightness});
            if caps.temperature.is_some() {
                v["ct"] = json!(ct);
            }
            if caps.rgb {
                v["rgb"] = json!(crate::light::format_rgb(rgb));
            }
            if caps.white {
                v["white"] = json!(white);
            }
            Ok(v)
        }
        _ => {
            dev.set_frequency(parsed(req, "id")?, number(req, "hz")?)
                .map_err(bad)?;
            Ok(ok)
        }
    }
}
