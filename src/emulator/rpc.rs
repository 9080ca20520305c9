//! Shelly Gen2+ JSON-RPC over HTTP: `POST /rpc` frames, `GET|POST /rpc/<Method>`, and `GET /shelly`.

use std::sync::atomic::Ordering;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::components::{
    CFG_REV, Status, config, device_info, em, em1, em1data, emdata, input_config, pm1, status,
    switch_config, switch_status,
};
use super::device::Device;
use super::firmware::Track;
pub(crate) use super::rpc_params::{
    RpcError, bool_param, id_param, index, invalid, missing, not_found, opt_number, precondition,
};
use super::server::{Request, Response, whole_json};
use super::state::{InputType, Source};
use super::{notify, rpc_cover, rpc_light, rpc_sensors, rpc_system, rpc_webhook, sensors};
use crate::models::{MeterSource, SensorQuantity};

/// Methods every device has; component namespaces add theirs (`Shelly.ListMethods`).
const METHODS: &[&str] = &[
    "Shelly.GetDeviceInfo",
    "Shelly.GetStatus",
    "Shelly.GetConfig",
    "Shelly.GetComponents",
    "Shelly.ListMethods",
    "Shelly.CheckForUpdate",
    "Shelly.Update",
    "Shelly.Reboot",
    "Sys.GetStatus",
    "Sys.GetConfig",
    "BLE.GetConfig",
    "BLE.GetStatus",
    "Cloud.GetConfig",
    "Cloud.GetStatus",
    "MQTT.GetConfig",
    "MQTT.GetStatus",
    "WiFi.GetConfig",
    "WiFi.GetStatus",
    "KVS.Set",
    "KVS.Get",
    "KVS.GetMany",
    "KVS.List",
    "KVS.Delete",
    "Script.Create",
    "Script.List",
    "Script.PutCode",
    "Script.GetCode",
    "Script.GetConfig",
    "Script.SetConfig",
    "Script.GetStatus",
    "Script.Start",
    "Script.Stop",
    "Script.Delete",
    "Script.Eval",
    "Webhook.ListSupported",
    "Ws.GetConfig",
    "Ws.SetConfig",
    "Ws.GetStatus",
    "MQTT.GetConfig",
    "MQTT.GetStatus",
    "Webhook.List",
    "Webhook.Create",
    "Webhook.Update",
    "Webhook.Delete",
    "Webhook.DeleteAll",
];

pub(crate) fn key(req: &Request) -> String {
    if req.path == "/rpc" && req.method == "POST" {
        let method = req
            .json_body()
            .and_then(|v| v.get("method")?.as_str().map(str::to_string));
        return match method {
            Some(m) => format!("rpc {m}"),
            None => "POST /rpc".into(),
        };
    }
    match req.path.strip_prefix("/rpc/") {
        Some(m) if !m.is_empty() => format!("rpc {m}"),
        _ => format!("{} {}", req.method, req.path),
    }
}

pub(crate) fn handle(dev: &Device, req: &Request) -> Response {
    match req.path.as_str() {
        "/shelly" => Response::json_whole(200, &device_info(dev, &dev.state())),
        "/rpc" if req.method == "POST" => frame(dev, req),
        p => match p.strip_prefix("/rpc/") {
            Some(method) if !method.is_empty() => direct(dev, method, req),
            _ => Response::text(404, "Not Found"),
        },
    }
}

/// `POST /rpc`: a whole request frame in, a whole response frame out (errors too, with status 200).
fn frame(dev: &Device, req: &Request) -> Response {
    let Some(Value::Object(f)) = req.json_body() else {
        let e = RpcError {
            code: -32700,
            message: "Parse error".into(),
        };
        return Response::json_whole(
            400,
            &json!({"id": null, "src": dev.ident.id, "error": e.to_json()}),
        );
    };
    Response::json_text(200, answer_text(dev, f))
}

/// [`answer_frame`] as the text `Response::json_whole` would make of it. A `Shelly.GetStatus` is written
/// straight from the state ([`Status`]); when a subscription has nothing to be measured against yet, that
/// text becomes it (`WsHub::measure_from_text`).
pub(crate) fn answer_text(dev: &Device, f: &Map<String, Value>) -> Vec<u8> {
    if !is_status_call(f) {
        return whole_json(&answer_frame(dev, f));
    }
    fn answer<R: Serialize>(dev: &Device, f: &Map<String, Value>, result: R) -> Vec<u8> {
        whole_json(&StatusAnswer {
            id: f.get("id").unwrap_or(&Value::Null),
            src: &dev.ident.id,
            dst: f.get("src"),
            result,
        })
    }
    let s = dev.state();
    if !dev.ws.subscribed.load(Ordering::SeqCst) || dev.ws.is_measured() {
        return answer(dev, f, Status { dev, s: &s });
    }
    // A subscription is measured with the status it is answered.
    let text = super::notify::status_text(dev, &s);
    dev.ws.measure_from_text(&text);
    match RawValue::from_string(text) {
        Ok(raw) => answer(dev, f, raw),
        Err(_) => whole_json(&answer_frame(dev, f)),
    }
}

/// Whether a request frame is a `Shelly.GetStatus` that `general` answers (its params absent, null or an
/// object; anything else is refused before).
pub(crate) fn is_status_call(f: &Map<String, Value>) -> bool {
    f.get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| m.eq_ignore_ascii_case("shelly.getstatus"))
        && matches!(f.get("params"), None | Some(Value::Null | Value::Object(_)))
}

/// A `Shelly.GetStatus` response frame, keys in `answer_frame`'s order.
#[derive(Serialize)]
struct StatusAnswer<'a, R> {
    id: &'a Value,
    src: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dst: Option<&'a Value>,
    result: R,
}

/// A request frame's response frame (also over the WebSocket).
pub(crate) fn answer_frame(dev: &Device, f: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), f.get("id").cloned().unwrap_or(Value::Null));
    out.insert("src".into(), json!(dev.ident.id));
    if let Some(src) = f.get("src") {
        out.insert("dst".into(), src.clone());
    }
    let result = match f.get("method").and_then(Value::as_str) {
        None => Err(missing("method")),
        Some(m) => match f.get("params") {
            None | Some(Value::Null) => call(dev, m, &Map::new()),
            Some(Value::Object(p)) => call(dev, m, p),
            Some(_) => Err(invalid("params")),
        },
    };
    match result {
        Ok(v) => out.insert("result".into(), v),
        Err(e) => out.insert("error".into(), e.to_json()),
    };
    Value::Object(out)
}

/// `GET /rpc/<Method>?a=1` or `POST /rpc/<Method>` with a params body: the bare result, or the bare error
/// with a non-2xx status.
fn direct(dev: &Device, method: &str, req: &Request) -> Response {
    let has_body = !req.body.iter().all(u8::is_ascii_whitespace);
    let params = if req.method == "POST" && has_body {
        match crate::untrusted_json::parse(&req.body) {
            Ok(Value::Object(p)) => p,
            Ok(Value::Null) => Map::new(),
            _ => return Response::json_whole(400, &invalid("params").to_json()),
        }
    } else {
        req.query_pairs()
            .into_iter()
            .map(|(k, v)| (k, query_value(&v)))
            .collect()
    };
    match call(dev, method, &params) {
        Ok(v) => Response::json_whole(200, &v),
        Err(e) => Response::json_whole(if e.code == NO_HANDLER { 404 } else { 400 }, &e.to_json()),
    }
}

/// Query values: `true`/`false`/`null`, numbers, JSON objects/arrays/quoted strings; anything else a string.
fn query_value(v: &str) -> Value {
    match v {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    if let Ok(n) = v.parse::<i64>() {
        return json!(n);
    }
    if let Ok(f) = v.parse::<f64>()
        && f.is_finite()
    {
        return json!(f);
    }
    if v.starts_with(['{', '[', '"'])
        && let Ok(j) = crate::untrusted_json::parse(v.as_bytes())
    {
        return j;
    }
    Value::String(v.to_string())
}

/// The code real firmware answers an unknown method with (over HTTP also the status).
const NO_HANDLER: i64 = 404;

/// An unknown method, as real firmware answers it (`{"code":404,"message":"No handler for X"}`).
fn method_not_found(method: &str) -> RpcError {
    RpcError {
        code: NO_HANDLER,
        // A method name is the client's text: printable ASCII only, bounded.
        message: format!(
            "No handler for {}",
            method
                .chars()
                .filter(char::is_ascii_graphic)
                .take(100)
                .collect::<String>()
        ),
    }
}

fn call(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let lower = method.to_ascii_lowercase();
    let ns = dev.ident.namespaces;
    let (namespace, _) = lower.split_once('.').unwrap_or((&lower, ""));
    // A namespace the model never has is unknown; one it has answers for its components.
    let result = match namespace {
        "shelly" => general(dev, &lower, p),
        "switch" if ns.switch => switch(dev, &lower, p),
        "cover" if ns.cover => rpc_cover::call(dev, &lower, p),
        "light" if ns.light => rpc_light::call(dev, "light", &lower, p),
        "cct" if ns.cct => rpc_light::call(dev, "cct", &lower, p),
        "rgb" if ns.rgb => rpc_light::call(dev, "rgb", &lower, p),
        "rgbw" if ns.rgbw => rpc_light::call(dev, "rgbw", &lower, p),
        "input" => input(dev, &lower, p),
        "temperature" | "humidity" | "voltmeter" | "devicepower" => {
            rpc_sensors::call(dev, &lower, p)
        }
        "em1" | "em1data" if ns.em1 => meters(dev, &lower, p),
        "em" | "emdata" if ns.em => meters(dev, &lower, p),
        "pm1" if ns.pm1 => meters(dev, &lower, p),
        "webhook" => rpc_webhook::call(dev, &lower, p),
        "ws" => ws(dev, &lower, p),
        "kvs" => dev.kvs.call(&lower, p),
        "script" => dev.scripts.call(&lower, p),
        n if rpc_system::SERVICES.contains(&n) => rpc_system::service(dev, n, &lower),
        _ => Err(RpcError::unknown()),
    };
    result.map_err(|e| e.or_unknown(method))
}

/// `Ws.*`: the outbound WebSocket.
fn ws(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    match method {
        "ws.getconfig" => Ok(dev.ws_out.config()),
        "ws.setconfig" => dev.ws_out.set_config(p).map_err(|message| RpcError {
            code: -103,
            message,
        }),
        "ws.getstatus" => Ok(json!({"connected": false})),
        _ => Err(RpcError::unknown()),
    }
}

/// `Shelly.*` and `Sys.*`.
fn general(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    match method {
        "shelly.getdeviceinfo" => Ok(device_info(dev, &dev.state())),
        "shelly.getstatus" => {
            let s = dev.state();
            let status = status(dev, &s);
            // A read over HTTP (`GET /rpc/Shelly.GetStatus`) while a WebSocket client has nothing to be
            // measured against yet.
            if dev.ws.subscribed.load(Ordering::SeqCst) && !dev.ws.is_measured() {
                notify::measure_from(&status, &dev.ws.last);
            }
            Ok(Value::Object(status))
        }
        "shelly.getconfig" => Ok(Value::Object(config(dev, &dev.state()))),
        "shelly.getcomponents" => components(dev, p),
        "shelly.listmethods" => Ok(json!({ "methods": methods(dev) })),
        "shelly.checkforupdate" => Ok(super::components::available_updates_with(dev, true)),
        "shelly.update" => update(dev, p),
        "shelly.reboot" => rpc_system::reboot(dev, p),
        _ => Err(RpcError::unknown()),
    }
}

/// `Shelly.Update {stage: "stable"|"beta"}`: starts the update (see `update.rs`) and answers `null`. A
/// refusal or nothing on offer is error -114 with the reason (the code real firmware uses here is not known).
fn update(dev: &Device, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let track = match p.get("stage").and_then(Value::as_str) {
        None | Some("stable") => Track::Stable,
        Some("beta") => Track::Beta,
        Some(_) => return Err(super::rpc_params::invalid("stage")),
    };
    super::update::begin(dev, track, false).map_err(|why| RpcError {
        code: -114,
        message: format!("Resource unavailable: {why}"),
    })?;
    Ok(Value::Null)
}

/// Component methods answer this when the method itself does not exist (mapped to "method not found").
const UNKNOWN: i64 = i64::MIN;

impl RpcError {
    /// The error a component module returns for a method it does not have.
    pub(crate) fn unknown() -> RpcError {
        RpcError {
            code: UNKNOWN,
            message: String::new(),
        }
    }

    fn or_unknown(self, method: &str) -> RpcError {
        if self.code == UNKNOWN {
            method_not_found(method)
        } else {
            self
        }
    }
}

/// `Shelly.ListMethods`: the general methods plus those of the namespaces the model has.
fn methods(dev: &Device) -> Vec<&'static str> {
    let ns = dev.ident.namespaces;
    let s = dev.state();
    let has = |q| sensors::of(&s.sensors, q).next().is_some();
    let mut m: Vec<&'static str> = METHODS.to_vec();
    let mut add = |on: bool, list: &[&'static str]| {
        if on {
            m.extend_from_slice(list);
        }
    };
    add(
        ns.switch,
        &[
            "Switch.Set",
            "Switch.Toggle",
            "Switch.GetStatus",
            "Switch.GetConfig",
        ],
    );
    add(ns.cover, rpc_cover::METHODS);
    add(ns.light, rpc_light::LIGHT);
    add(ns.cct, rpc_light::CCT);
    add(ns.rgb, rpc_light::RGB);
    add(ns.rgbw, rpc_light::RGBW);
    add(
        s.layout.inputs > 0,
        &["Input.GetStatus", "Input.GetConfig", "Input.SetConfig"],
    );
    add(
        ns.em1,
        &[
            "EM1.GetStatus",
            "EM1Data.GetStatus",
            "EM1Data.GetRecords",
            "EM1Data.GetData",
        ],
    );
    add(
        ns.em,
        &[
            "EM.GetStatus",
            "EMData.GetStatus",
            "EMData.GetRecords",
            "EMData.GetData",
        ],
    );
    add(ns.pm1, &["PM1.GetStatus"]);
    add(
        has(SensorQuantity::Temperature),
        &["Temperature.GetStatus", "Temperature.GetConfig"],
    );
    add(
        has(SensorQuantity::Humidity),
        &["Humidity.GetStatus", "Humidity.GetConfig"],
    );
    add(
        has(SensorQuantity::Voltage),
        &["Voltmeter.GetStatus", "Voltmeter.GetConfig"],
    );
    add(s.layout.battery, &["DevicePower.GetStatus"]);
    let cfg = config(dev, &s);
    for (key, list) in rpc_system::EXTRA_METHODS {
        add(cfg.contains_key(*key), list);
    }
    m
}

fn input(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let mut s = dev.state();
    if s.layout.inputs == 0 {
        return Err(RpcError::unknown());
    }
    let i = index(p, 0, s.inputs.len())?;
    match method {
        "input.getstatus" => Ok(json!({"id": i, "state": s.input_state(i)})),
        "input.getconfig" => Ok(input_config(i, s.input_types[i])),
        "input.setconfig" => {
            let Some(Value::Object(c)) = p.get("config") else {
                return Err(missing("config"));
            };
            if let Some(t) = c.get("type") {
                s.input_types[i] = match t.as_str() {
                    Some("switch") => InputType::Switch,
                    Some("button") => InputType::Button,
                    _ => return Err(invalid("config.type")),
                };
            }
            Ok(json!({"restart_required": false}))
        }
        _ => Err(RpcError::unknown()),
    }
}

/// `EM1`, `EM1Data`, `EM`, `EMData`, `PM1`: present only while the profile's meters are of that kind.
fn meters(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let s = dev.state();
    let src = s.layout.meter_source;
    let n = |want: MeterSource| if src == want { s.meters.len() } else { 0 };
    match method {
        "em1.getstatus" | "em1data.getstatus" => {
            let i = index(p, 0, n(MeterSource::Em1))?;
            Ok(if method.starts_with("em1data") {
                em1data(i, &s.meter(i))
            } else {
                em1(i, &s.meter(i))
            })
        }
        "em.getstatus" | "emdata.getstatus" => {
            index(p, 0, usize::from(src == MeterSource::Em))?;
            Ok(if method.starts_with("emdata") {
                emdata(&s)
            } else {
                em(&s)
            })
        }
        "pm1.getstatus" => {
            let i = index(p, 0, n(MeterSource::Pm1))?;
            Ok(pm1(i, &s.meter(i)))
        }
        "em1data.getrecords" | "em1data.getdata" => {
            let i = index(p, 0, n(MeterSource::Em1))?;
            let db = super::rpc_history::Database::Channel(i);
            super::rpc_history::serve(&s, db, &method[8..], p)
        }
        "emdata.getrecords" | "emdata.getdata" => {
            index(p, 0, usize::from(src == MeterSource::Em))?;
            let db = super::rpc_history::Database::Phases;
            super::rpc_history::serve(&s, db, &method[7..], p)
        }
        _ => Err(RpcError::unknown()),
    }
}

fn switch(dev: &Device, method: &str, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let mut s = dev.state();
    let n = if s.layout.lights { 0 } else { s.outputs.len() };
    match method {
        "switch.set" | "switch.toggle" | "switch.getstatus" | "switch.getconfig" => {}
        _ => return Err(RpcError::unknown()),
    }
    let i = index(p, 0, n)?;
    match method {
        "switch.set" => {
            let on = bool_param(p, "on")?;
            Ok(json!({"was_on": s.set_output(i, on, Source::Remote)}))
        }
        "switch.toggle" => {
            let on = !s.outputs[i];
            Ok(json!({"was_on": s.set_output(i, on, Source::Remote)}))
        }
        "switch.getstatus" => Ok(switch_status(dev, &s, i)),
        _ => Ok(switch_config(&s, i)),
    }
}

/// Components one `Shelly.GetComponents` page holds at most; a client pages on with `offset` up to `total`.
const PAGE: usize = 20;

/// `Shelly.GetComponents {offset, include, keys, dynamic_only}`: the components present in both status and
/// config, a page from `offset`, each with `status` and `config` unless `include` picks. `dynamic_only`: only
/// the components created at runtime (virtual, BTHome: ids 200..299), which an emulated device never has.
fn components(dev: &Device, p: &Map<String, Value>) -> Result<Value, RpcError> {
    let offset = match p.get("offset") {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_u64().ok_or_else(|| invalid("offset"))? as usize,
    };
    let flag = |name: &str| match p.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(name)),
    };
    let dynamic_only = flag("dynamic_only")?;
    let strings = |name: &str| -> Result<Option<Vec<String>>, RpcError> {
        match p.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string).ok_or_else(|| invalid(name)))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(invalid(name)),
        }
    };
    let include = strings("include")?;
    let keys = strings("keys")?;
    let wants = |part: &str| include.as_ref().is_none_or(|i| i.iter().any(|x| x == part));
    let s = dev.state();
    let status = status(dev, &s);
    let config = config(dev, &s);
    drop(s);
    let all: Vec<Value> = status
        .iter()
        .filter(|(k, _)| !dynamic_only || is_dynamic(k))
        .filter(|(k, _)| keys.as_ref().is_none_or(|ks| ks.iter().any(|x| x == *k)))
        .filter_map(|(k, st)| {
            let c = config.get(k)?;
            let mut m = Map::new();
            m.insert("key".into(), json!(k));
            if wants("status") {
                m.insert("status".into(), st.clone());
            }
            if wants("config") {
                m.insert("config".into(), c.clone());
            }
            Some(Value::Object(m))
        })
        .collect();
    let total = all.len();
    let page: Vec<Value> = all.into_iter().skip(offset).take(PAGE).collect();
    Ok(json!({"components": page, "cfg_rev": CFG_REV, "offset": offset, "total": total}))
}

/// A component created at runtime: ids 200..=299 (virtual components, BTHome devices and sensors).
fn is_dynamic(key: &str) -> bool {
    key.rsplit_once(':')
        .and_then(|(_, id)| id.parse::<u32>().ok())
        .is_some_and(|id| (200..300).contains(&id))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status answer written straight from the state is, byte for byte, the answer built as a tree (which
    /// notifications and MQTT still use): for every Gen2+ model, idle and then switched on, loaded and a few
    /// minutes on, whatever the request's `id` and `src`.
    #[test]
    fn a_status_answer_written_as_text_is_the_tree_answer() {
        let frames = [
            json!({"id": 7, "src": "client", "method": "Shelly.GetStatus"}),
            json!({"id": "x", "method": "shelly.getstatus", "params": {}}),
            json!({"id": null, "src": {"odd": 1}, "method": "SHELLY.GetStatus", "params": null}),
        ];
        let (mut compared, mut devices) = (0, 0);
        super::super::every_model::each_rpc_model_idle_then_loaded(|model, dev, round| {
            devices += 1;
            for frame in &frames {
                let Value::Object(f) = frame else {
                    unreachable!()
                };
                let text = String::from_utf8(answer_text(dev, f)).unwrap();
                let tree = String::from_utf8(whole_json(&answer_frame(dev, f))).unwrap();
                assert_eq!(text, tree, "{model}, round {round}, {frame}");
                assert!(text.contains("\"result\":{\"ble\":{}"), "{text}");
                compared += 1;
            }
        });
        assert_eq!(compared, devices * frames.len());
    }

    #[test]
    fn query_values_are_typed() {
        assert_eq!(query_value("true"), json!(true));
        assert_eq!(query_value("0"), json!(0));
        assert_eq!(query_value("2.5"), json!(2.5));
        assert_eq!(query_value("abc"), json!("abc"));
        assert_eq!(query_value("\"1\""), json!("1"));
        assert_eq!(query_value("[\"http://x\"]"), json!(["http://x"]));
        assert_eq!(query_value("{bad"), json!("{bad"));
    }

    #[test]
    fn ids_offset_and_errors() {
        let p: Map<String, Value> = serde_json::from_str(r#"{"id":101}"#).unwrap();
        assert_eq!(index(&p, 100, 2), Ok(1));
        assert_eq!(index(&p, 100, 1), Err(not_found("id", 101)));
        assert_eq!(index(&p, 0, 1).unwrap_err().code, -105);
        assert_eq!(index(&Map::new(), 0, 1).unwrap_err().code, -103);
        let e = not_found("id", 7);
        assert_eq!(e.message, "Argument 'id', value 7 not found!");
    }
}
