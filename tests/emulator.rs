//! The device emulator over real HTTP, spoken to with raw `TcpStream`s.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use smartdev::ModelLibrary;
use smartdev::emulator::{DeviceSpec, EmuClock, Emulator, Fault, MeterReading};

mod common;

use common::raw_http::{Reply, local, request, send};

fn get(port: u16, target: &str) -> Reply {
    request(port, "GET", target, None)
}

fn get_json(port: u16, target: &str) -> Value {
    let r = get(port, target);
    assert_eq!(
        r.status,
        200,
        "{target}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

fn post(port: u16, target: &str, body: &str) -> Reply {
    request(port, "POST", target, Some(body))
}

/// A whole RPC frame round trip.
fn rpc_frame(port: u16, method: &str, params: Value) -> Value {
    let frame = json!({"id": 7, "src": "tester", "method": method, "params": params});
    let r = post(port, "/rpc", &frame.to_string());
    assert_eq!(r.status, 200);
    r.json()
}

fn rpc(port: u16, method: &str, params: Value) -> Value {
    let f = rpc_frame(port, method, params);
    assert!(f.get("error").is_none(), "{method}: {f}");
    f["result"].clone()
}

fn rpc_err(port: u16, method: &str, params: Value) -> (i64, String) {
    let f = rpc_frame(port, method, params);
    let e = &f["error"];
    (
        e["code"].as_i64().unwrap(),
        e["message"].as_str().unwrap().to_string(),
    )
}

fn start(specs: Vec<DeviceSpec>) -> Emulator {
    Emulator::start(specs, &ModelLibrary::embedded()).unwrap()
}

fn one(model: &str) -> Emulator {
    start(vec![DeviceSpec::new(model)])
}

/// One device on a clock the test moves: energy and uptime follow `clock.advance`, not the wall clock.
fn one_on_manual_clock(model: &str) -> (Emulator, EmuClock) {
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(
        vec![DeviceSpec::new(model)],
        &ModelLibrary::embedded(),
        clock.clone(),
    )
    .unwrap();
    (emu, clock)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// A local webhook receiver: every request target arrives on the channel.

// ---- lifecycle ----

#[test]
fn emulator_is_send_and_sync_and_rejects_unknown_models() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Emulator>();
    let e = Emulator::start(
        vec![
            DeviceSpec::new("ShellyPlus1PM"),
            DeviceSpec::new("Shelly9000"),
        ],
        &ModelLibrary::embedded(),
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("Shelly9000"), "{e}");
    let mut t = DeviceSpec::new("Tasmota");
    t.reported_model = Some("X".into());
    assert!(Emulator::start(vec![t], &ModelLibrary::embedded()).is_err());
    let emu = start(vec![]);
    assert!(emu.is_empty());
    assert_eq!(emu.len(), 0);
    assert_ne!(emu.admin_port(), 0);
}

#[test]
fn stop_joins_and_frees_the_ports() {
    let emu = start(vec![
        DeviceSpec::new("ShellyPlus1PM"),
        DeviceSpec::new("Tasmota"),
    ]);
    let ports = [emu.port(0), emu.port(1), emu.admin_port()];
    emu.set_fault(1, Fault::Refuse);
    emu.set_fault(0, Fault::Blackhole);
    let mut held = TcpStream::connect(("127.0.0.1", ports[0])).unwrap();
    held.write_all(b"GET /shelly HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    emu.stop();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // The blackholed connection was released.
    held.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        held.read_to_end(&mut buf).map(|_| buf.len()).unwrap_or(0),
        0
    );
    for p in ports {
        assert!(
            TcpStream::connect(("127.0.0.1", p)).is_err(),
            "port {p} still listens"
        );
        TcpListener::bind(("127.0.0.1", p)).unwrap_or_else(|e| panic!("port {p}: {e}"));
    }
    // Drop stops too.
    let emu = one("ShellyEM");
    let p = emu.port(0);
    drop(emu);
    TcpListener::bind(("127.0.0.1", p)).unwrap();
}

#[test]
fn chosen_ports_and_ids_are_used() {
    let free = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut spec = DeviceSpec::new("ShellyPlus2PM");
    spec.port = free;
    spec.id = Some("shellyplus2pm-c4d8d5517c68".into());
    let emu = start(vec![spec]);
    assert_eq!(emu.port(0), free);
    let s = get_json(free, "/shelly");
    assert_eq!(s["id"], "shellyplus2pm-c4d8d5517c68");
    assert_eq!(s["mac"], "C4D8D5517C68");
}

// ---- Shelly Gen1 ----

#[test]
fn gen1_relays_meters_and_units() {
    let (emu, clock) = one_on_manual_clock("Shelly2.5");
    let p = emu.port(0);
    let s = get_json(p, "/shelly");
    assert_eq!(s["type"], "SHSW-25");
    assert_eq!(s["auth"], false);
    assert_eq!(
        (s["num_outputs"].as_u64(), s["num_meters"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(s["mac"].as_str().unwrap().len(), 12);

    let st = get_json(p, "/status");
    assert_eq!(st["relays"].as_array().unwrap().len(), 2);
    for k in [
        "ison",
        "has_timer",
        "timer_started",
        "timer_duration",
        "timer_remaining",
        "overpower",
        "source",
    ] {
        assert!(st["relays"][0].get(k).is_some(), "relay field {k}");
    }
    assert_eq!(st["relays"][1]["ison"], false);
    assert_eq!(
        st["meters"][0]["power"],
        json!(0),
        "no load while the relay is off"
    );
    assert_eq!(st["meters"][0]["counters"].as_array().unwrap().len(), 3);
    assert_eq!(
        st["inputs"][0],
        json!({"input": 0, "event": "", "event_cnt": 0})
    );
    assert_eq!(st["tmp"]["is_valid"], true);
    assert_eq!(st["temperature"], json!(45));
    assert!(st["update"]["has_update"].is_boolean());
    assert!(st["uptime"].is_u64());

    // Switching over HTTP and locally.
    let r = get_json(p, "/relay/1?turn=on");
    assert_eq!(r["ison"], true);
    assert_eq!(r["source"], "http");
    assert!(emu.output(0, 1));
    assert_eq!(get_json(p, "/relay/1?turn=toggle")["ison"], false);
    assert_eq!(get_json(p, "/relay/1")["ison"], false);
    assert_eq!(get(p, "/relay/2").status, 404);
    assert_eq!(get(p, "/relay/0?turn=sideways").status, 400);
    emu.set_output(0, 0, true);
    emu.set_input(0, 1, true);
    emu.set_temperature(0, 61.25);
    let st = get_json(p, "/status");
    assert_eq!(st["relays"][0]["ison"], true);
    assert_eq!(st["meters"][0]["power"], json!(100));
    assert_eq!(st["inputs"][1]["input"], 1, "inputs are integers");
    assert_eq!(st["tmp"]["tC"], json!(61.25));

    // Totals are watt-minutes.
    emu.set_meter(
        0,
        1,
        MeterReading {
            power: 0.0,
            voltage: 230.0,
            current: 0.0,
            pf: 1.0,
            energy_wh: 10.0,
            returned_wh: 0.0,
        },
    );
    assert_eq!(get_json(p, "/status")["meters"][1]["total"], json!(600));
    emu.set_meter(
        0,
        0,
        MeterReading {
            power: 3600.0,
            voltage: 230.0,
            current: 15.0,
            pf: 1.0,
            energy_wh: 0.0,
            returned_wh: 0.0,
        },
    );
    clock.advance(Duration::from_millis(600));
    let total = get_json(p, "/status")["meters"][0]["total"]
        .as_i64()
        .unwrap();
    assert_eq!(total, 36, "3600 W for 0.6 s is 36 W·min");

    let settings = get_json(p, "/settings");
    assert_eq!(settings["device"]["type"], "SHSW-25");
    assert_eq!(settings["device"]["mac"], s["mac"]);
    assert!(
        settings["device"]["hostname"]
            .as_str()
            .unwrap()
            .starts_with("shelly25-")
    );
    assert_eq!(settings["relays"][0]["ison"], true);

    let c = emu.counts(0);
    assert_eq!(c["GET /status"], 4);
    assert_eq!(c["GET /relay/1"], 3);
    assert_eq!(c["GET /shelly"], 1);
    assert_eq!(c["GET /settings"], 1);
    assert_eq!(emu.total_requests(0), c.values().sum::<u64>());
    emu.reset_counts(0);
    assert_eq!(emu.total_requests(0), 0);
}

#[test]
fn gen1_emeters_are_wh_with_returned_energy() {
    let (emu, clock) = one_on_manual_clock("Shelly3EM");
    let p = emu.port(0);
    let s = get_json(p, "/shelly");
    assert_eq!(
        (
            s["type"].as_str(),
            s["num_emeters"].as_u64(),
            s["num_meters"].as_u64()
        ),
        (Some("SHEM-3"), Some(3), Some(0))
    );
    emu.set_meter(
        0,
        2,
        MeterReading {
            power: -1800.0,
            voltage: 231.0,
            current: 7.8,
            pf: 1.0,
            energy_wh: 5000.0,
            returned_wh: 0.0,
        },
    );
    clock.advance(Duration::from_millis(300));
    let st = get_json(p, "/status");
    let e = &st["emeters"];
    assert_eq!(e.as_array().unwrap().len(), 3);
    assert_eq!(e[0]["power"], json!(100), "separate meters always draw");
    for k in [
        "power",
        "pf",
        "current",
        "voltage",
        "is_valid",
        "total",
        "total_returned",
    ] {
        assert!(e[0].get(k).is_some(), "emeter field {k}");
    }
    assert_eq!(e[2]["power"], json!(-1800));
    assert_eq!(e[2]["total"], json!(5000));
    let ret = e[2]["total_returned"].as_f64().unwrap();
    assert!(ret > 0.05 && ret < 1.0, "{ret}");
    assert!(st.get("meters").is_none());
    assert!(
        st.get("tmp").is_none(),
        "no temperature monitoring on this model"
    );
}

#[test]
fn gen1_action_urls_are_webhooks() {
    let (hport, rx) = common::raw_http::hook_listener();
    let emu = one("Shelly1PM");
    let p = emu.port(0);
    let list = get_json(p, "/settings/actions");
    assert_eq!(
        list["actions"]["out_on_url"],
        json!([{"index": 0, "enabled": false, "urls": []}])
    );
    assert!(list["actions"].get("btn_on_url").is_some());

    let url = format!("http://127.0.0.1:{hport}/hook?ev=on&t=${{status.temp}}");
    let enc: String = url
        .replace(':', "%3A")
        .replace('/', "%2F")
        .replace('?', "%3F")
        .replace('&', "%26");
    let set = get_json(
        p,
        &format!("/settings/actions?index=0&name=out_on_url&enabled=true&urls%5B%5D={enc}"),
    );
    assert_eq!(set["actions"]["out_on_url"][0]["urls"], json!([url]));
    assert_eq!(
        get(p, "/settings/actions?index=3&name=out_on_url&urls[]=x").status,
        400
    );
    assert_eq!(
        get(p, "/settings/actions?index=0&name=report_url&urls[]=x").status,
        400
    );

    let hooks = emu.webhooks(0);
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["event"], "switch.on");
    assert_eq!(hooks[0]["name"], "out_on_url");
    assert_eq!(hooks[0]["cid"], 0);

    assert_eq!(emu.fire_event(0, "switch.on", 0), 1);
    let line = rx.recv_timeout(Duration::from_secs(3)).unwrap();
    assert_eq!(line, "GET /hook?ev=on&t=${status.temp} HTTP/1.1");
    assert_eq!(emu.fire_event(0, "switch.off", 0), 0);
    assert_eq!(emu.fire_event(0, "switch.on", 1), 0);

    // Disabling keeps the URL but stops calls.
    get_json(p, "/settings/actions?index=0&name=out_on_url&enabled=false");
    assert_eq!(emu.webhooks(0)[0]["enable"], false);
    assert_eq!(emu.fire_event(0, "switch.on", 0), 0);
    assert_eq!(emu.counts(0)["GET /settings/actions"], 5);
}

#[test]
fn gen1_probes_are_ext_temperature() {
    let mut spec = DeviceSpec::new("Shelly1");
    spec.probes = vec!["Roof".into(), "Pool".into()];
    let emu = start(vec![spec]);
    let p = emu.port(0);
    emu.set_probe(0, 1, Some(30.0));
    let st = get_json(p, "/status");
    assert_eq!(st["ext_temperature"]["1"]["tC"], json!(30));
    assert_eq!(st["ext_temperature"]["1"]["tF"], json!(86));
    assert!(st["ext_temperature"]["0"]["hwID"].is_string());
    emu.set_probe(0, 0, None);
    let st = get_json(p, "/status");
    assert!(st["ext_temperature"].get("0").is_none());
    assert!(st.get("meters").is_none() && st.get("temperature").is_none());
}

// ---- Shelly Gen2+ RPC ----

#[test]
fn rpc_shelly_endpoint_and_device_info() {
    let mut spec = DeviceSpec::new("Shelly2PMG3");
    spec.reported_model = Some("S3SW-002P16EU-X".into());
    let emu = start(vec![spec, DeviceSpec::new("ShellyPro3EM")]);
    let s = get_json(emu.port(0), "/shelly");
    let id = s["id"].as_str().unwrap();
    assert!(id.starts_with("shelly2pmg3-"), "{id}");
    assert_eq!(id[12..].to_uppercase(), s["mac"].as_str().unwrap());
    assert_eq!(s["model"], "S3SW-002P16EU-X");
    assert_eq!(
        (
            s["gen"].as_u64(),
            s["auth_en"].as_bool(),
            s["auth_domain"].is_null()
        ),
        (Some(3), Some(false), true)
    );
    assert_eq!(s["profile"], "switch");
    for k in ["fw_id", "ver", "app"] {
        assert!(s[k].is_string(), "{k}");
    }
    assert_eq!(rpc(emu.port(0), "Shelly.GetDeviceInfo", json!({})), s);
    let s = get_json(emu.port(1), "/shelly");
    assert_eq!(
        (s["model"].as_str(), s["profile"].as_str()),
        (Some("SPEM-003CEBEU"), Some("triphase"))
    );
}

#[test]
fn rpc_switches_inputs_and_frames() {
    let emu = one("Shelly2PMG3");
    let p = emu.port(0);
    let f = rpc_frame(p, "Switch.Set", json!({"id": 1, "on": true}));
    assert_eq!(f["id"], 7);
    assert_eq!(f["dst"], "tester");
    assert_eq!(f["src"].as_str(), get_json(p, "/shelly")["id"].as_str());
    assert_eq!(f["result"], json!({"was_on": false}));
    assert!(emu.output(0, 1));
    assert_eq!(
        rpc(p, "Switch.Set", json!({"id": 1, "on": true})),
        json!({"was_on": true})
    );
    assert_eq!(
        rpc(p, "Switch.Toggle", json!({"id": 0})),
        json!({"was_on": false})
    );
    assert!(emu.output(0, 0));
    emu.set_input(0, 1, true);
    emu.set_output(0, 0, false);

    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert_eq!(st["input:1"], json!({"id": 1, "state": true}));
    assert_eq!(st["input:0"]["state"], false);
    let sw = &st["switch:1"];
    assert_eq!(
        (
            sw["id"].as_u64(),
            sw["output"].as_bool(),
            sw["source"].as_str()
        ),
        (Some(1), Some(true), Some("HTTP_in"))
    );
    assert_eq!(sw["apower"], json!(100));
    assert_eq!(sw["voltage"], json!(230.1));
    assert_eq!(sw["pf"], json!(0.95));
    assert!(close(sw["current"].as_f64().unwrap(), 0.457));
    assert_eq!(sw["aenergy"]["by_minute"].as_array().unwrap().len(), 3);
    assert_eq!(sw["aenergy"]["minute_ts"].as_i64().unwrap() % 60, 0);
    assert!(sw["ret_aenergy"]["total"].is_number());
    assert_eq!(sw["temperature"], json!({"tC": 45, "tF": 113}));
    assert_eq!(st["switch:0"]["output"], false);
    assert_eq!(st["switch:0"]["apower"], json!(0), "no power while off");
    let sys = &st["sys"];
    for k in [
        "mac",
        "restart_required",
        "time",
        "unixtime",
        "uptime",
        "ram_size",
        "ram_free",
        "fs_size",
        "fs_free",
        "cfg_rev",
        "kvs_rev",
        "webhook_rev",
        "available_updates",
    ] {
        assert!(sys.get(k).is_some(), "sys.{k}");
    }
    for k in ["wifi", "cloud", "mqtt"] {
        assert!(st.get(k).is_some(), "{k}");
    }
    assert_eq!(rpc(p, "Switch.GetStatus", json!({"id": 1})), *sw);
    assert_eq!(rpc(p, "Input.GetStatus", json!({"id": 1})), st["input:1"]);

    // The GET and POST channels give bare results.
    let r = get(p, "/rpc/Switch.Set?id=0&on=true");
    assert_eq!((r.status, r.json()), (200, json!({"was_on": false})));
    let r = post(p, "/rpc/Switch.Set", r#"{"id":0,"on":false}"#);
    assert_eq!((r.status, r.json()), (200, json!({"was_on": true})));
    assert!(!emu.output(0, 0));
    let r = get(p, "/rpc/Switch.GetStatus?id=0");
    assert_eq!(r.json()["output"], false);
    assert_eq!(r.header("content-type"), Some("application/json"));

    let c = emu.counts(0);
    assert_eq!(c["rpc Switch.Set"], 4);
    assert_eq!(c["rpc Switch.Toggle"], 1);
    assert_eq!(c["rpc Shelly.GetStatus"], 1);
    assert_eq!(c["rpc Switch.GetStatus"], 2);
    assert_eq!(c["GET /shelly"], 1);
}

#[test]
fn rpc_error_codes() {
    let emu = one("ShellyPlus1PM");
    let p = emu.port(0);
    assert_eq!(
        rpc_err(p, "Switch.Fly", json!({})),
        (404, "No handler for Switch.Fly".into())
    );
    assert_eq!(
        rpc_err(p, "Switch.Set", json!({"id": 3, "on": true})),
        (-105, "Argument 'id', value 3 not found!".into())
    );
    assert_eq!(rpc_err(p, "Switch.Set", json!({"on": true})).0, -103);
    assert_eq!(rpc_err(p, "Switch.Set", json!({"id": 0})).0, -103);
    assert_eq!(
        rpc_err(p, "EM1.GetStatus", json!({"id": 0})).0,
        404,
        "no em1 on this model"
    );
    let r = get(p, "/rpc/Switch.GetStatus?id=9");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["code"], -105);
    let r = get(p, "/rpc/Nope.Nothing");
    assert_eq!((r.status, r.json()["code"].as_i64()), (404, Some(404)));
    assert_eq!(post(p, "/rpc", "{not json").status, 400);
    assert_eq!(emu.counts(0)["POST /rpc"], 1);
    // Method names are case-insensitive, like the devices'.
    assert_eq!(rpc(p, "shelly.getstatus", json!({}))["switch:0"]["id"], 0);
}

#[test]
fn rpc_models_without_switch_meters_or_temperature() {
    let lib = ModelLibrary::from_json_str(
        r#"[{"model":"ShellyCool1","name":"Cool","generation":2,"protocol":"RPC","inputs":1,"outputs":1,
             "meters":0,"temperature_monitoring":false,"reported_models":["COOL-1"]}]"#,
    )
    .unwrap();
    let e = Emulator::start(vec![DeviceSpec::new("ShellyPro1")], &lib)
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("ShellyPro1"),
        "not in the custom library: {e}"
    );
    let emu = Emulator::start(vec![DeviceSpec::new("ShellyCool1")], &lib).unwrap();
    let sw = rpc(emu.port(0), "Switch.GetStatus", json!({"id": 0}));
    assert_eq!(sw, json!({"id": 0, "source": "init", "output": false}));
    let emu = one("ShellyPro1");
    let sw = rpc(emu.port(0), "Switch.GetStatus", json!({"id": 0}));
    assert!(sw.get("apower").is_none() && sw.get("aenergy").is_none());
    assert!(sw.get("temperature").is_some());
}

#[test]
fn rpc_em1_channels() {
    let (emu, clock) = one_on_manual_clock("ShellyEMG3");
    let p = emu.port(0);
    emu.set_meter(
        0,
        1,
        MeterReading {
            power: 231.9,
            voltage: 232.9,
            current: 1.904,
            pf: 0.68,
            energy_wh: 8797.5,
            returned_wh: 1.25,
        },
    );
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    let em1 = &st["em1:1"];
    assert_eq!(em1["act_power"], json!(231.9));
    assert_eq!(em1["voltage"], json!(232.9));
    assert_eq!(em1["current"], json!(1.904));
    assert_eq!(em1["pf"], json!(0.68));
    assert_eq!(em1["calibration"], "factory");
    assert!(em1["aprt_power"].is_number() && em1["freq"].is_number());
    assert_eq!(st["em1data:1"]["total_act_ret_energy"], json!(1.25));
    assert!(st["em1data:1"]["total_act_energy"].as_f64().unwrap() >= 8797.5);
    assert_eq!(st["switch:0"]["output"], false);
    assert!(st["switch:0"].get("apower").is_none());
    assert_eq!(
        rpc(p, "EM1.GetStatus", json!({"id": 1}))["act_power"],
        json!(231.9)
    );
    assert_eq!(rpc(p, "EM1Data.GetStatus", json!({"id": 0}))["id"], 0);
    assert_eq!(rpc_err(p, "EM1.GetStatus", json!({"id": 2})).0, -105);
    let e0 = rpc(p, "EM1Data.GetStatus", json!({"id": 0}))["total_act_energy"]
        .as_f64()
        .unwrap();
    clock.advance(Duration::from_millis(400));
    let e1 = rpc(p, "EM1Data.GetStatus", json!({"id": 0}))["total_act_energy"]
        .as_f64()
        .unwrap();
    assert!(
        e1 > e0,
        "separate meters accumulate regardless of outputs: {e0} → {e1}"
    );
}

#[test]
fn rpc_three_phase_totals_are_sums() {
    let (emu, clock) = one_on_manual_clock("ShellyPro3EM");
    let p = emu.port(0);
    emu.set_load(0, 0, 120.4);
    emu.set_load(0, 1, -3600.0);
    emu.set_meter(
        0,
        2,
        MeterReading {
            power: 6.8,
            voltage: 232.7,
            current: 0.068,
            pf: 0.42,
            energy_wh: 45236.95,
            returned_wh: 0.0,
        },
    );
    clock.advance(Duration::from_millis(200));
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    let em = &st["em:0"];
    assert_eq!(em["c_act_power"], json!(6.8));
    assert_eq!(em["c_voltage"], json!(232.7));
    assert_eq!(em["b_act_power"], json!(-3600));
    assert!(em["n_current"].is_null());
    assert_eq!(em["user_calibrated_phase"], json!([]));
    let sum = |k: &str| {
        ["a", "b", "c"]
            .iter()
            .map(|ph| em[format!("{ph}_{k}")].as_f64().unwrap())
            .sum::<f64>()
    };
    assert!(close(
        em["total_act_power"].as_f64().unwrap(),
        sum("act_power")
    ));
    assert!(close(em["total_current"].as_f64().unwrap(), sum("current")));
    assert!(close(
        em["total_aprt_power"].as_f64().unwrap(),
        sum("aprt_power")
    ));
    let d = &st["emdata:0"];
    let dsum = |k: &str| {
        ["a", "b", "c"]
            .iter()
            .map(|ph| d[format!("{ph}_{k}")].as_f64().unwrap())
            .sum::<f64>()
    };
    assert!(close(
        d["total_act"].as_f64().unwrap(),
        dsum("total_act_energy")
    ));
    assert!(close(
        d["total_act_ret"].as_f64().unwrap(),
        dsum("total_act_ret_energy")
    ));
    assert!(
        d["b_total_act_ret_energy"].as_f64().unwrap() > 0.0,
        "export accumulates returned energy"
    );
    assert_eq!(rpc(p, "EM.GetStatus", json!({"id": 0}))["id"], 0);
    assert!(rpc(p, "EMData.GetStatus", json!({"id": 0}))["total_act"].is_number());
    assert!(st.get("switch:0").is_none() && st.get("input:0").is_none());
}

#[test]
fn rpc_pm1_meter() {
    let emu = one("ShellyPlusPMMini");
    let st = rpc(emu.port(0), "Shelly.GetStatus", json!({}));
    let pm = &st["pm1:0"];
    assert_eq!(pm["apower"], json!(100));
    for k in ["id", "voltage", "current", "freq", "aenergy", "ret_aenergy"] {
        assert!(pm.get(k).is_some(), "pm1 field {k}");
    }
    assert_eq!(rpc(emu.port(0), "PM1.GetStatus", json!({"id": 0}))["id"], 0);
}

#[test]
fn rpc_addon_probes_by_name() {
    let mut spec = DeviceSpec::new("Shelly1G3");
    spec.probes = vec!["Roof Temp".into(), "Pool Temp".into()];
    let emu = start(vec![spec]);
    let p = emu.port(0);
    let cfg = rpc(p, "Shelly.GetConfig", json!({}));
    assert_eq!(cfg["temperature:100"]["name"], "Roof Temp");
    assert_eq!(
        cfg["temperature:101"],
        json!({"id": 101, "name": "Pool Temp", "report_thr_C": 0.1, "offset_C": 0})
    );
    assert!(cfg.get("temperature:102").is_none());
    assert_eq!(cfg["sys"]["device"]["addon_type"], "sensor");
    assert_eq!(cfg["sys"]["device"]["mac"], get_json(p, "/shelly")["mac"]);
    assert_eq!(cfg["switch:0"]["id"], 0);
    emu.set_probe(0, 1, Some(27.84));
    emu.set_probe(0, 0, None);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert_eq!(
        st["temperature:101"],
        json!({"id": 101, "tC": 27.8, "tF": 82.1})
    );
    assert_eq!(
        st["temperature:100"],
        json!({"id": 100, "tC": null, "tF": null})
    );
    assert_eq!(
        rpc(p, "Temperature.GetStatus", json!({"id": 101}))["tC"],
        json!(27.8)
    );
    let comps = rpc(p, "Shelly.GetComponents", json!({}));
    assert!(
        comps["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["key"] == "temperature:100")
    );
}

#[test]
fn rpc_webhooks_lifecycle_and_firing() {
    let (hport, rx) = common::raw_http::hook_listener();
    let emu = one("Shelly2PMG3");
    let p = emu.port(0);
    let types = rpc(p, "Webhook.ListSupported", json!({}))["types"].clone();
    for e in [
        "input.toggle_on",
        "input.toggle_off",
        "input.button_push",
        "input.button_longpush",
        "input.button_doublepush",
        "input.button_triplepush",
        "switch.on",
        "switch.off",
    ] {
        assert_eq!(types[e], json!({}), "{e}");
    }
    let url = format!(
        "http://127.0.0.1:{hport}/shelly/webhook?Event=input.toggle_on&DeviceID=1&ComponentID=1&v=${{ev.state}}"
    );
    let created = rpc(
        p,
        "Webhook.Create",
        json!({"cid": 1, "enable": true, "event": "input.toggle_on", "name": "In A: input.toggle_on", "urls": [url]}),
    );
    assert_eq!(created, json!({"id": 1, "rev": 1}));
    let list = rpc(p, "Webhook.List", json!({}));
    assert_eq!(list["rev"], 1);
    assert_eq!(
        list["hooks"][0],
        json!({"id": 1, "cid": 1, "enable": true, "event": "input.toggle_on", "name": "In A: input.toggle_on",
               "ssl_ca": null, "urls": [url], "condition": null, "repeat_period": 0})
    );
    assert_eq!(emu.webhooks(0), list["hooks"].as_array().unwrap().clone());
    assert_eq!(
        rpc(p, "Shelly.GetStatus", json!({}))["sys"]["webhook_rev"],
        1
    );

    assert_eq!(emu.fire_event(0, "input.toggle_on", 1), 1);
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(3)).unwrap(),
        "GET /shelly/webhook?Event=input.toggle_on&DeviceID=1&ComponentID=1&v=${ev.state} HTTP/1.1"
    );
    assert_eq!(
        emu.fire_event(0, "input.toggle_on", 0),
        0,
        "other component"
    );
    assert_eq!(emu.fire_event(0, "input.toggle_off", 1), 0, "other event");

    assert_eq!(
        rpc(p, "Webhook.Update", json!({"id": 1, "enable": false})),
        json!({"rev": 2})
    );
    assert_eq!(emu.fire_event(0, "input.toggle_on", 1), 0);
    assert_eq!(rpc_err(p, "Webhook.Update", json!({"id": 9})).0, -105);
    assert_eq!(
        rpc_err(
            p,
            "Webhook.Create",
            json!({"cid": 0, "event": "cover.open", "urls": []})
        )
        .0,
        -103
    );
    assert_eq!(
        rpc_err(
            p,
            "Webhook.Create",
            json!({"cid": 5, "event": "switch.on", "urls": []})
        )
        .0,
        -105
    );
    assert_eq!(
        rpc(p, "Webhook.Delete", json!({"id": 1})),
        json!({"rev": 3})
    );
    assert_eq!(rpc_err(p, "Webhook.Delete", json!({"id": 1})).0, -105);

    for i in 0..20 {
        let r = rpc(
            p,
            "Webhook.Create",
            json!({"cid": i % 2, "enable": true, "event": "switch.on", "urls": [format!("http://127.0.0.1:{hport}/n{i}")]}),
        );
        assert_eq!(r["id"], 2 + i);
    }
    assert_eq!(
        rpc_err(
            p,
            "Webhook.Create",
            json!({"cid": 0, "event": "switch.off", "urls": []})
        ),
        (-108, "resource exhausted".into())
    );
    assert_eq!(emu.fire_event(0, "switch.on", 1), 10);
    let mut got: Vec<String> = (0..10)
        .map(|_| rx.recv_timeout(Duration::from_secs(3)).unwrap())
        .collect();
    got.sort();
    assert!(got.iter().all(|l| l.starts_with("GET /n")), "{got:?}");
    let r = rpc(p, "Webhook.DeleteAll", json!({}));
    assert_eq!(r["rev"], 24);
    assert!(
        rpc(p, "Webhook.List", json!({}))["hooks"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(emu.counts(0)["rpc Webhook.Create"], 24);
}

#[test]
fn energy_accumulates_only_while_on() {
    // 1PM Gen3 reports returned energy (`ret_aenergy`); a Plus 1PM does not.
    let (emu, clock) = one_on_manual_clock("Shelly1PMG3");
    let p = emu.port(0);
    emu.set_load(0, 0, 3600.0);
    clock.advance(Duration::from_millis(300));
    let off = rpc(p, "Switch.GetStatus", json!({"id": 0}))["aenergy"]["total"]
        .as_f64()
        .unwrap();
    assert_eq!(off, 0.0);
    emu.set_output(0, 0, true);
    clock.advance(Duration::from_millis(500));
    let on = rpc(p, "Switch.GetStatus", json!({"id": 0}))["aenergy"]["total"]
        .as_f64()
        .unwrap();
    // 3600 W = 1 Wh per second.
    assert!(close(on, 0.5), "{on}");
    emu.set_load(0, 0, -3600.0);
    clock.advance(Duration::from_millis(300));
    let sw = rpc(p, "Switch.GetStatus", json!({"id": 0}));
    assert!(close(sw["ret_aenergy"]["total"].as_f64().unwrap(), 0.3));
    assert_eq!(sw["apower"], json!(-3600));
    assert!(close(sw["aenergy"]["total"].as_f64().unwrap(), on));
}

// ---- Tasmota ----

#[test]
fn tasmota_status_and_power() {
    let mut spec = DeviceSpec::new("Tasmota");
    spec.outputs = Some(3);
    spec.meters = Some(2);
    spec.probes = vec!["Boiler".into(), "Outside".into()];
    let emu = start(vec![spec, DeviceSpec::new("Tasmota")]);
    let p = emu.port(0);
    let s = get_json(p, "/cm?cmnd=Status%200");
    for k in [
        "Status",
        "StatusPRM",
        "StatusFWR",
        "StatusLOG",
        "StatusMEM",
        "StatusNET",
        "StatusMQT",
        "StatusTIM",
        "StatusSNS",
        "StatusSTS",
    ] {
        assert!(s.get(k).is_some(), "{k}");
    }
    assert_eq!(s["Status"]["Power"], 0);
    assert_eq!(s["Status"]["FriendlyName"].as_array().unwrap().len(), 3);
    assert_eq!(s["StatusFWR"]["Version"], "13.4.0(tasmota)");
    let mac = s["StatusNET"]["Mac"].as_str().unwrap();
    assert_eq!(mac.len(), 17);
    assert!(
        s["StatusNET"]["Hostname"]
            .as_str()
            .unwrap()
            .starts_with("tasmota-")
    );
    let up = s["StatusPRM"]["Uptime"].as_str().unwrap();
    assert!(up.starts_with("0T00:00:"), "{up}");
    assert_eq!(s["StatusSTS"]["POWER2"], "OFF");
    let sns = &s["StatusSNS"];
    assert_eq!(
        sns["DS18B20-2"],
        json!({"Id": "Outside", "Temperature": 22.5})
    );
    assert_eq!(sns["ESP32"]["Temperature"], json!(45.0));
    assert_eq!(sns["TempUnit"], "C");
    let energy = &sns["ENERGY"];
    assert_eq!(energy["Power"], json!([0, 0]), "relays off");
    assert_eq!(energy["Voltage"], json!([230, 230]));
    assert_eq!(energy["Total"].as_array().unwrap().len(), 2);
    for k in [
        "TotalStartTime",
        "Yesterday",
        "Today",
        "ApparentPower",
        "ReactivePower",
        "Factor",
        "Current",
    ] {
        assert!(energy.get(k).is_some(), "ENERGY.{k}");
    }

    assert_eq!(get_json(p, "/cm?cmnd=Power2%201"), json!({"POWER2": "ON"}));
    assert_eq!(get_json(p, "/cm?cmnd=Power3+on"), json!({"POWER3": "ON"}));
    assert_eq!(get_json(p, "/cm?cmnd=Power3%202"), json!({"POWER3": "OFF"}));
    assert_eq!(
        get_json(p, "/cm?cmnd=Power%20toggle"),
        json!({"POWER1": "ON"})
    );
    assert_eq!(get_json(p, "/cm?cmnd=power2"), json!({"POWER2": "ON"}));
    assert!(emu.output(0, 1) && emu.output(0, 0) && !emu.output(0, 2));
    let s = get_json(p, "/cm?cmnd=Status%200");
    assert_eq!(s["Status"]["Power"], 0b011);
    assert_eq!(s["StatusSTS"]["POWER1"], "ON");
    assert_eq!(s["StatusSNS"]["ENERGY"]["Power"], json!([100, 100]));
    assert_eq!(
        get_json(p, "/cm?cmnd=Power4%201"),
        json!({"Command": "Unknown"})
    );
    assert_eq!(get_json(p, "/cm?cmnd=Fly"), json!({"Command": "Unknown"}));
    assert_eq!(get_json(p, "/cm?cmnd=Status")["Status"]["Power"], 3);
    assert!(get_json(p, "/cm?cmnd=Status%2011")["StatusSTS"]["Wifi"].is_object());

    emu.set_probe(0, 0, None);
    assert_eq!(
        get_json(p, "/cm?cmnd=Status%2010")["StatusSNS"]["DS18B20"],
        json!({"Id": "Outside", "Temperature": 22.5})
    );

    emu.set_localised_power_text(0, "EIN", "AUS");
    assert_eq!(get_json(p, "/cm?cmnd=Power1%200"), json!({"POWER1": "AUS"}));
    assert_eq!(
        get_json(p, "/cm?cmnd=Status%200")["StatusSTS"]["POWER2"],
        "EIN"
    );

    let c = emu.counts(0);
    assert_eq!(c["cm Status 0"], 3);
    assert_eq!(c["cm Power2 1"], 1);
    assert_eq!(c["cm Power3 on"], 1);
    assert_eq!(c["cm Fly"], 1);

    // One relay, one meter: plain values and `POWER`.
    let q = emu.port(1);
    assert_eq!(get_json(q, "/cm?cmnd=Power%201"), json!({"POWER": "ON"}));
    emu.set_meter(
        1,
        0,
        MeterReading {
            power: 45.0,
            voltage: 231.0,
            current: 0.2,
            pf: 0.97,
            energy_wh: 12345.0,
            returned_wh: 0.0,
        },
    );
    let s = get_json(q, "/cm?cmnd=Status%200");
    assert_eq!(s["StatusSTS"]["POWER"], "ON");
    assert!(s["StatusSTS"].get("POWER1").is_none());
    let e = &s["StatusSNS"]["ENERGY"];
    assert_eq!(e["Power"], json!(45));
    assert_eq!(e["Voltage"], json!(231));
    assert_eq!(e["Factor"], json!(0.97));
    assert!(e["Total"].as_f64().unwrap() >= 12.345);
    assert!(s["StatusSNS"].get("DS18B20").is_none());
}

// ---- faults ----

#[test]
fn faults_each_behave() {
    let emu = one("ShellyPlus1PM");
    let p = emu.port(0);
    let short = Duration::from_millis(400);

    emu.set_fault(0, Fault::Refuse);
    assert!(TcpStream::connect(("127.0.0.1", p)).is_err());
    emu.set_fault(0, Fault::None);
    assert_eq!(get(p, "/shelly").status, 200);
    assert_eq!(emu.port(0), p);

    emu.set_fault(0, Fault::Http500);
    let r = get(p, "/rpc/Switch.Set?id=0&on=true");
    assert_eq!(r.status, 500);
    assert!(!r.body.is_empty());
    assert!(!emu.output(0, 0), "a 500 does not act");

    emu.set_fault(0, Fault::MalformedJson);
    let r = get(p, "/rpc/Shelly.GetStatus");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, b"{\"broken\":".as_slice())
    );

    emu.set_fault(0, Fault::TruncatedBody);
    let r = get(p, "/rpc/Shelly.GetStatus");
    let announced: usize = r.header("content-length").unwrap().parse().unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body.len() < announced, "{} of {announced}", r.body.len());

    emu.set_fault(0, Fault::Blackhole);
    let t = Instant::now();
    let e = send(local(p), "GET", "/shelly", &[], None, short).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
        "{e:?}"
    );
    assert!(t.elapsed() >= short);
    // Releasing the fault closes held connections.
    let mut held = TcpStream::connect(("127.0.0.1", p)).unwrap();
    held.write_all(b"GET /shelly HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    emu.set_fault(0, Fault::None);
    held.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = Vec::new();
    let n = held.read_to_end(&mut buf).map(|_| buf.len()).unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");

    emu.set_latency(0, Duration::from_millis(300));
    let t = Instant::now();
    assert_eq!(get(p, "/shelly").status, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    emu.set_fault(0, Fault::Http500);
    let t = Instant::now();
    assert_eq!(get(p, "/shelly").status, 500);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "latency combines with faults"
    );
    emu.set_latency(0, Duration::ZERO);
    emu.set_fault(0, Fault::None);

    // Faulted and blackholed requests count, refused ones do not.
    let c = emu.counts(0);
    assert_eq!(c["GET /shelly"], 5);
    assert_eq!(c["rpc Shelly.GetStatus"], 2);
    assert_eq!(c["rpc Switch.Set"], 1);
}

#[test]
fn flapping_alternates_between_refusing_and_serving() {
    let emu = one("Shelly1PMG4");
    let p = emu.port(0);
    emu.set_fault(0, Fault::Flapping(Duration::from_millis(150)));
    let (mut ok, mut refused, mut changes) = (0, 0, 0);
    let mut last = None;
    let end = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < end {
        let up = send(
            local(p),
            "GET",
            "/shelly",
            &[],
            None,
            Duration::from_secs(1),
        )
        .is_ok_and(|r| r.status == 200);
        if up {
            ok += 1
        } else {
            refused += 1
        }
        if last.is_some_and(|l| l != up) {
            changes += 1;
        }
        last = Some(up);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        ok > 3 && refused > 3 && changes >= 4,
        "ok {ok}, refused {refused}, changes {changes}"
    );
    emu.set_fault(0, Fault::None);
    assert_eq!(get(p, "/shelly").status, 200);
}

#[test]
fn idle_clients_do_not_hang_a_port() {
    let emu = one("ShellyPlus1PM");
    let p = emu.port(0);
    let _idle = TcpStream::connect(("127.0.0.1", p)).unwrap();
    let t = Instant::now();
    assert_eq!(get(p, "/shelly").status, 200);
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
}

// ---- admin endpoint ----

#[test]
fn admin_endpoint_routes() {
    let (hport, rx) = common::raw_http::hook_listener();
    let mut spec = DeviceSpec::new("ShellyPlus2PM");
    spec.probes = vec!["P".into()];
    let emu = start(vec![spec, DeviceSpec::new("Tasmota")]);
    let a = emu.admin_port();
    let p = emu.port(0);

    let list = get_json(a, "/devices");
    assert_eq!(list[0]["index"], 0);
    assert_eq!(list[0]["model"], "ShellyPlus2PM");
    assert_eq!(list[0]["port"], p);
    assert_eq!(list[0]["id"], get_json(p, "/shelly")["id"]);
    assert_eq!(list[1]["model"], "Tasmota");

    assert_eq!(post(a, "/devices/0/fault?kind=refuse", "").status, 200);
    assert!(TcpStream::connect(("127.0.0.1", p)).is_err());
    assert_eq!(post(a, "/devices/0/fault?kind=none", "").status, 200);
    assert_eq!(get(p, "/shelly").status, 200);
    assert_eq!(post(a, "/devices/0/fault?kind=http500", "").status, 200);
    assert_eq!(get(p, "/shelly").status, 500);
    assert_eq!(
        post(a, "/devices/0/fault?kind=flapping&ms=100", "").status,
        200
    );
    assert_eq!(post(a, "/devices/0/fault?kind=none", "").status, 200);
    assert_eq!(post(a, "/devices/0/latency?ms=200", "").status, 200);
    let t = Instant::now();
    get(p, "/shelly");
    assert!(t.elapsed() >= Duration::from_millis(200));
    post(a, "/devices/0/latency?ms=0", "");

    assert_eq!(post(a, "/devices/0/output?id=1&state=true", "").status, 200);
    assert!(emu.output(0, 1));
    post(a, "/devices/0/input?id=0&state=true", "");
    post(a, "/devices/0/load?id=1&watts=-250.5", "");
    post(a, "/devices/0/probe?id=0&celsius=19.5", "");
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert_eq!(st["input:0"]["state"], true);
    assert_eq!(st["switch:1"]["apower"], json!(-250.5));
    assert_eq!(st["temperature:100"]["tC"], json!(19.5));
    post(a, "/devices/0/probe?id=0", "");
    assert!(rpc(p, "Shelly.GetStatus", json!({}))["temperature:100"]["tC"].is_null());

    let counts = get_json(a, "/devices/0/counts");
    assert_eq!(counts["rpc Shelly.GetStatus"], 2);
    assert_eq!(counts["GET /shelly"], 4);

    rpc(
        p,
        "Webhook.Create",
        json!({"cid": 0, "enable": true, "event": "switch.off", "urls": [format!("http://127.0.0.1:{hport}/off")]}),
    );
    assert_eq!(get_json(a, "/devices/0/webhooks")[0]["event"], "switch.off");
    let r = post(a, "/devices/0/fire?event=switch.off&id=0", "");
    assert_eq!(r.json(), json!({"called": 1}));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(3)).unwrap(),
        "GET /off HTTP/1.1"
    );

    // Bad input and unknown devices.
    for (target, status) in [
        ("/devices/0/fault?kind=meltdown", 400),
        ("/devices/0/fault?kind=flapping", 400),
        ("/devices/0/output?id=7&state=true", 400),
        ("/devices/0/output?id=0&state=maybe", 400),
        ("/devices/0/load?id=0", 400),
        ("/devices/9/output?id=0&state=true", 404),
        ("/devices/x/counts", 404),
        ("/nothing", 404),
    ] {
        let r = post(a, target, "");
        assert_eq!(r.status, status, "{target}");
        assert!(r.json()["error"].is_string(), "{target}");
    }
    assert_eq!(get(a, "/devices/0/output?id=0&state=true").status, 405);
    assert_eq!(request(a, "DELETE", "/devices/0/counts", None).status, 200);
    assert_eq!(emu.total_requests(0), 0);
}

#[test]
fn many_devices_start_answer_and_stop_quickly() {
    let models = [
        "ShellyPlus1PM",
        "Shelly2.5",
        "Tasmota",
        "ShellyPro3EM",
        "ShellyEMG3",
    ];
    let specs: Vec<DeviceSpec> = (0..200)
        .map(|i| DeviceSpec::new(models[i % models.len()]))
        .collect();
    let t = Instant::now();
    let emu = start(specs);
    let mut ids = std::collections::HashSet::new();
    for i in 0..emu.len() {
        let target = if i % 5 == 2 {
            "/cm?cmnd=Status%205"
        } else {
            "/shelly"
        };
        assert_eq!(get(emu.port(i), target).status, 200, "device {i}");
        assert!(ids.insert(emu.device_id(i).to_string()), "ids are unique");
    }
    emu.stop();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn admin_move_takes_a_device_to_another_address_with_its_state_and_mac() {
    let emu = start(vec![DeviceSpec::new("ShellyPlus1PM")]);
    let a = emu.admin_port();
    let p = emu.port(0);
    let mac = get_json(p, "/shelly")["mac"].clone();
    emu.set_output(0, 0, true);
    let at = |ip: [u8; 4], port: u16| std::net::SocketAddr::from((ip, port));
    let shelly = |addr| send(addr, "GET", "/shelly", &[], None, Duration::from_secs(5));

    // Another address (on Linux every 127.x.y.z is this host): the port stays, the old address refuses.
    let r = post(a, "/devices/0/move?address=127.0.0.2", "");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"address": "127.0.0.2", "port": p}));
    assert!(TcpStream::connect(local(p)).is_err());
    assert_eq!(shelly(at([127, 0, 0, 2], p)).unwrap().json()["mac"], mac);
    assert_eq!(get_json(a, "/devices/0")["address"], "127.0.0.2");
    assert_eq!(emu.address(0), at([127, 0, 0, 2], p));
    assert!(emu.output(0, 0), "the state moves with the device");

    // No address: a free port at the same address.
    let r = post(a, "/devices/0/move", "").json();
    let q = u16::try_from(r["port"].as_u64().unwrap()).unwrap();
    assert_ne!(q, p);
    assert_eq!(r["address"], "127.0.0.2");
    assert!(TcpStream::connect(at([127, 0, 0, 2], p)).is_err());
    assert_eq!(emu.port(0), q);
    let body = send(
        at([127, 0, 0, 2], q),
        "POST",
        "/rpc",
        &[],
        Some(r#"{"id":1,"method":"Switch.GetStatus","params":{"id":0}}"#),
        Duration::from_secs(5),
    )
    .unwrap()
    .json();
    assert_eq!(body["result"]["output"], true);

    // A refused spell ends listening at the new address, not the first one.
    assert_eq!(post(a, "/devices/0/fault?kind=refuse", "").status, 200);
    assert!(TcpStream::connect(at([127, 0, 0, 2], q)).is_err());
    assert_eq!(post(a, "/devices/0/fault?kind=none", "").status, 200);
    assert!(
        common::eventually(Duration::from_secs(5), || shelly(at([127, 0, 0, 2], q))
            .is_ok()),
        "not listening again at the new address"
    );

    // Bad requests name what was wrong, and the device stays where it is.
    for (target, says) in [
        ("/devices/0/move?address=banana", "not an IP address"),
        ("/devices/0/move?port=70000", "not a port"),
        // TEST-NET-1: no host has it.
        (
            "/devices/0/move?address=192.0.2.1",
            "cannot move device 0 to 192.0.2.1",
        ),
    ] {
        let r = post(a, target, "");
        assert_eq!(r.status, 400, "{target}");
        let msg = r.json()["error"].as_str().unwrap().to_string();
        assert!(msg.contains(says), "{target}: {msg}");
    }
    assert_eq!(get(a, "/devices/0/move").status, 405);
    assert_eq!(emu.address(0), at([127, 0, 0, 2], q));
    assert_eq!(shelly(at([127, 0, 0, 2], q)).unwrap().status, 200);
    // Dropping the emulator stops the port at its new address (it would hang if it woke the old one).
    drop(emu);
}
