//! The emulator's profiles and richer components over real HTTP: switch/cover profiles, covers moving on the
//! manual clock, Gen1 rollers, Tasmota shutters, per-component energy fields, the Pro 3EM monophase profile,
//! sensors, button inputs and dimmers.

use std::time::Duration;

use serde_json::{Value, json};
use smartdev::ModelLibrary;
use smartdev::emulator::{
    AddonSensor, CoverState, DeviceSpec, EmuClock, Emulator, InputType, Press,
};
use smartdev::models::SensorQuantity;

mod common;

use common::raw_http::{Reply, request};

fn get(port: u16, target: &str) -> Reply {
    request(port, "GET", target, None)
}

fn get_json(port: u16, target: &str) -> Value {
    let r = get(port, target);
    assert_eq!(r.status, 200, "{target}: {}", r.text());
    r.json()
}

fn post(port: u16, target: &str) -> Reply {
    request(port, "POST", target, None)
}

fn rpc_frame(port: u16, method: &str, params: Value) -> Value {
    let frame = json!({"id": 1, "src": "tester", "method": method, "params": params});
    let r = request(port, "POST", "/rpc", Some(&frame.to_string()));
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
        e["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method}: no error in {f}")),
        e["message"].as_str().unwrap().to_string(),
    )
}

fn tasmota(port: u16, cmnd: &str) -> Value {
    get_json(port, &format!("/cm?cmnd={}", cmnd.replace(' ', "%20")))
}

/// Devices on a clock the test moves.
fn manual(specs: Vec<DeviceSpec>) -> (Emulator, EmuClock) {
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(specs, &ModelLibrary::embedded(), clock.clone()).unwrap();
    (emu, clock)
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn with_profile(model: &str, profile: &str) -> DeviceSpec {
    let mut s = DeviceSpec::new(model);
    s.profile = Some(profile.into());
    s
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// A local webhook receiver: every request target arrives on the channel.

// ---- 1. profiles ----

#[test]
fn a_profile_switch_reboots_into_the_other_layout() {
    let (emu, clock) = manual(vec![DeviceSpec::new("Shelly2PMG4")]);
    let p = emu.port(0);
    assert_eq!(get_json(p, "/shelly")["profile"], "switch");
    assert_eq!(emu.profile(0).as_deref(), Some("switch"));
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert!(st.get("switch:1").is_some() && st.get("cover:0").is_none());
    clock.advance(secs(100.0));
    assert!(
        rpc(p, "Sys.GetStatus", json!({}))["uptime"]
            .as_u64()
            .unwrap()
            >= 100
    );

    emu.set_profile(0, "cover").unwrap();
    let info = get_json(p, "/shelly");
    assert_eq!(info["profile"], "cover");
    assert_eq!(rpc(p, "Shelly.GetDeviceInfo", json!({})), info);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert!(st.get("cover:0").is_some(), "{st}");
    assert!(st.get("switch:0").is_none() && st.get("switch:1").is_none());
    assert!(st.get("input:0").is_some() && st.get("input:1").is_some());
    assert_eq!(st["sys"]["uptime"], 0, "the device rebooted");
    assert_eq!(
        rpc_err(p, "Switch.Set", json!({"id": 0, "on": true})),
        (-105, "Argument 'id', value 0 not found!".into())
    );
    let cfg = rpc(p, "Shelly.GetConfig", json!({}));
    assert_eq!(cfg["sys"]["device"]["profile"], "cover");
    assert!(cfg.get("cover:0").is_some() && cfg.get("switch:0").is_none());
    let types = rpc(p, "Webhook.ListSupported", json!({}))["types"].clone();
    for e in [
        "cover.open",
        "cover.closed",
        "cover.stopped",
        "cover.opening",
        "cover.closing",
        "cover.calibrating",
    ] {
        assert!(types.get(e).is_some(), "{e} in {types}");
    }
    assert!(types.get("switch.on").is_none() && types.get("switch.off").is_none());
    let comps = rpc(p, "Shelly.GetComponents", json!({}));
    assert!(
        comps["components"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["key"] == "cover:0")
    );

    let e = emu.set_profile(0, "roller").unwrap_err().to_string();
    assert!(e.contains("'roller'") && e.contains("switch, cover"), "{e}");
    let e = emu.set_profile(0, "x").unwrap_err().to_string();
    assert!(e.contains("Shelly2PMG4"), "{e}");

    // The admin endpoint does the same.
    let a = emu.admin_port();
    let r = post(a, "/devices/0/profile?name=switch");
    assert_eq!((r.status, r.json()), (200, json!({"profile": "switch"})));
    assert!(
        rpc(p, "Shelly.GetStatus", json!({}))
            .get("switch:0")
            .is_some()
    );
    let r = post(a, "/devices/0/profile?name=blinds");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("switch, cover"), "{}", r.text());
    assert_eq!(get_json(a, "/devices/0/profile")["profile"], "switch");
}

#[test]
fn a_spec_profile_and_models_without_profiles() {
    let start = |specs| Emulator::start(specs, &ModelLibrary::embedded());
    let emu = start(vec![
        with_profile("Shelly2PMG3", "cover"),
        DeviceSpec::new("ShellyPlus1PM"),
    ])
    .unwrap();
    assert_eq!(get_json(emu.port(0), "/shelly")["profile"], "cover");
    assert!(get_json(emu.port(1), "/shelly").get("profile").is_none());
    assert!(emu.set_profile(1, "cover").is_err());
    assert_eq!(
        rpc_err(emu.port(1), "Cover.Open", json!({"id": 0})).0,
        404,
        "a model without covers has no Cover methods"
    );
    let e = start(vec![with_profile("Shelly2PMG3", "blinds")])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("use one of: switch, cover"), "{e}");
}

// ---- 2. Gen2+ covers ----

fn cover_device() -> (Emulator, EmuClock, u16) {
    let (emu, clock) = manual(vec![with_profile("Shelly2PMG3", "cover")]);
    let p = emu.port(0);
    (emu, clock, p)
}

fn cover_status(p: u16) -> Value {
    rpc(p, "Cover.GetStatus", json!({"id": 0}))
}

#[test]
fn cover_status_and_config_have_the_real_fields() {
    let (_emu, _clock, p) = cover_device();
    let st = cover_status(p);
    assert_eq!(
        keys(&st),
        [
            "id",
            "source",
            "state",
            "apower",
            "voltage",
            "current",
            "pf",
            "freq",
            "aenergy",
            "temperature",
            "pos_control",
            "last_direction",
            "current_pos"
        ]
    );
    assert_eq!(
        (&st["state"], &st["source"], &st["current_pos"]),
        (&json!("closed"), &json!("init"), &json!(0))
    );
    assert_eq!(st["last_direction"], Value::Null);
    assert_eq!(st["apower"], json!(0), "no power while standing");
    assert_eq!(rpc(p, "Shelly.GetStatus", json!({}))["cover:0"], st);
    let cfg = rpc(p, "Cover.GetConfig", json!({"id": 0}));
    for k in [
        "name",
        "motor",
        "maxtime_open",
        "maxtime_close",
        "initial_state",
        "in_mode",
        "swap_inputs",
        "safety_switch",
        "power_limit",
        "obstruction_detection",
    ] {
        assert!(cfg.get(k).is_some(), "cover config {k}");
    }
    assert_eq!(rpc(p, "Shelly.GetConfig", json!({}))["cover:0"], cfg);
    let methods = rpc(p, "Shelly.ListMethods", json!({}))["methods"].clone();
    for m in ["Cover.Open", "Cover.GoToPosition", "Cover.Calibrate"] {
        assert!(methods.as_array().unwrap().contains(&json!(m)), "{m}");
    }
}

#[test]
fn cover_methods_move_the_cover_over_the_clock() {
    let (emu, clock, p) = cover_device();
    assert_eq!(rpc(p, "Cover.Open", json!({"id": 0})), Value::Null);
    let st = cover_status(p);
    assert_eq!(st["state"], "opening");
    assert_eq!(st["source"], "HTTP_in");
    assert_eq!(st["last_direction"], "open");
    assert_eq!(
        st["apower"],
        json!(100),
        "the motor draws power while moving"
    );
    assert!(st["move_started_at"].is_number() && st["move_timeout"].is_number());
    assert!(
        st.get("target_pos").is_none(),
        "Open is no positioning request"
    );
    clock.advance(secs(5.0));
    assert_eq!(cover_status(p)["current_pos"], 25);
    assert_eq!(emu.cover(0, 0).state, CoverState::Opening);
    clock.advance(secs(20.0));
    let st = cover_status(p);
    assert_eq!(
        (&st["state"], &st["current_pos"], &st["apower"]),
        (&json!("open"), &json!(100), &json!(0))
    );
    assert!(st.get("move_started_at").is_none());
    // 100 W for exactly the 20 s the travel took, not the 25 s that passed.
    let wh = st["aenergy"]["total"].as_f64().unwrap();
    assert!(close(wh, 100.0 * 20.0 / 3600.0, 1e-3), "{wh}");

    assert_eq!(
        rpc(p, "Cover.GoToPosition", json!({"id": 0, "pos": 40})),
        Value::Null
    );
    let st = cover_status(p);
    assert_eq!(
        (&st["state"], &st["target_pos"]),
        (&json!("closing"), &json!(40))
    );
    clock.advance(secs(6.0));
    assert_eq!(cover_status(p)["current_pos"], 70);
    rpc(p, "Cover.Stop", json!({"id": 0}));
    let st = cover_status(p);
    assert_eq!(
        (&st["state"], &st["current_pos"], &st["last_direction"]),
        (&json!("stopped"), &json!(70), &json!("close"))
    );
    assert!(st.get("target_pos").is_none());
    clock.advance(secs(30.0));
    assert_eq!(cover_status(p)["current_pos"], 70, "a stopped cover stays");

    rpc(p, "Cover.GoToPosition", json!({"id": 0, "rel": -20}));
    clock.advance(secs(4.0));
    assert_eq!(cover_status(p)["current_pos"], 50);
    assert_eq!(cover_status(p)["state"], "stopped");

    rpc(p, "Cover.Close", json!({"id": 0, "duration": 2}));
    clock.advance(secs(10.0));
    assert_eq!(
        (
            cover_status(p)["current_pos"].clone(),
            cover_status(p)["state"].clone()
        ),
        (json!(40), json!("stopped"))
    );
    rpc(p, "Cover.Close", json!({"id": 0}));
    clock.advance(secs(8.0));
    assert_eq!(cover_status(p)["state"], "closed");

    assert_eq!(rpc(p, "Cover.Calibrate", json!({"id": 0})), Value::Null);
    assert_eq!(cover_status(p)["state"], "calibrating");
    assert_eq!(
        rpc_err(p, "Cover.Calibrate", json!({"id": 0})).0,
        -109,
        "already calibrating"
    );
    clock.advance(secs(41.0));
    let st = cover_status(p);
    assert_eq!(
        (&st["state"], &st["pos_control"]),
        (&json!("closed"), &json!(true))
    );

    for (params, code) in [
        (json!({"id": 0, "pos": 101}), -103),
        (json!({"id": 0}), -103),
        (json!({"id": 1, "pos": 5}), -105),
    ] {
        assert_eq!(
            rpc_err(p, "Cover.GoToPosition", params.clone()).0,
            code,
            "{params}"
        );
    }
    assert_eq!(
        rpc_err(p, "Cover.Open", json!({"id": 0, "duration": -1})).0,
        -103
    );
    assert_eq!(rpc_err(p, "Cover.Fly", json!({"id": 0})).0, 404);
    // The direct GET form works too.
    let r = get(p, "/rpc/Cover.GoToPosition?id=0&pos=10");
    assert_eq!((r.status, r.text().as_str()), (200, "null"));
}

#[test]
fn an_uncalibrated_cover_hides_its_position_and_refuses_positioning() {
    let (emu, clock, p) = cover_device();
    emu.set_cover_calibrated(0, 0, false);
    let st = cover_status(p);
    assert_eq!(st["pos_control"], false);
    assert!(st.get("current_pos").is_none());
    let (code, msg) = rpc_err(p, "Cover.GoToPosition", json!({"id": 0, "pos": 50}));
    assert_eq!(code, -109, "{msg}");
    assert!(msg.contains("calibrated"), "{msg}");
    // Open and close still run on time.
    rpc(p, "Cover.Open", json!({"id": 0}));
    clock.advance(secs(30.0));
    assert_eq!(cover_status(p)["state"], "open");
    assert_eq!(emu.cover(0, 0).position, 100.0);

    // Admin controls: position and calibration.
    let a = emu.admin_port();
    let r = post(a, "/devices/0/cover?id=0&position=35&calibrated=true");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"state": "stopped", "position": 35.0, "target": null, "calibrated": true})
    );
    assert_eq!(cover_status(p)["current_pos"], 35);
    assert_eq!(get_json(a, "/devices/0/cover?id=0")["state"], "stopped");
    assert_eq!(post(a, "/devices/0/cover?id=3").status, 400);
    assert_eq!(post(a, "/devices/0/cover?id=0&position=120").status, 400);
    emu.set_cover_position(0, 0, 100.0);
    assert_eq!(emu.cover(0, 0).state, CoverState::Open);
}

#[test]
fn a_gen4_2pm_in_the_cover_profile_looks_like_the_real_one() {
    let emu = Emulator::start(
        vec![with_profile("Shelly2PMG4", "cover")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let p = emu.port(0);
    let info = get_json(p, "/shelly");
    for k in [
        "name",
        "id",
        "mac",
        "slot",
        "model",
        "gen",
        "fw_id",
        "ver",
        "app",
        "auth_en",
        "auth_domain",
        "profile",
    ] {
        assert!(info.get(k).is_some(), "/shelly {k}");
    }
    assert_eq!(
        (&info["model"], &info["gen"], &info["profile"]),
        (&json!("S4SW-002P16EU"), &json!(4), &json!("cover"))
    );
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    let comps: Vec<String> = keys(&st).into_iter().filter(|k| k.contains(':')).collect();
    assert_eq!(comps, ["cover:0", "input:0", "input:1"]);

    // A dual cover controller: two covers, each with its own meter.
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyProDualCoverPM")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let p = emu.port(0);
    assert!(get_json(p, "/shelly").get("profile").is_none());
    rpc(p, "Cover.Open", json!({"id": 1}));
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert_eq!(
        (&st["cover:0"]["apower"], &st["cover:1"]["apower"]),
        (&json!(0), &json!(100))
    );
    assert_eq!(st["cover:1"]["state"], "opening");
}

// ---- 3. Gen1 roller ----

#[test]
fn a_shelly_25_in_roller_mode() {
    let (emu, clock) = manual(vec![
        with_profile("Shelly2.5", "roller"),
        DeviceSpec::new("Shelly2.5"),
    ]);
    let p = emu.port(0);
    let info = get_json(p, "/shelly");
    assert_eq!(
        (&info["mode"], &info["num_rollers"], &info["num_outputs"]),
        (&json!("roller"), &json!(1), &json!(2))
    );
    let settings = get_json(p, "/settings");
    assert_eq!(settings["mode"], "roller");
    assert_eq!(settings["rollers"].as_array().unwrap().len(), 1);
    assert_eq!(settings["rollers"][0]["positioning"], true);
    assert_eq!(get_json(emu.port(1), "/settings")["mode"], "relay");

    let st = get_json(p, "/status");
    assert!(st.get("relays").is_none(), "roller mode has no relays");
    assert_eq!(st["meters"].as_array().unwrap().len(), 2);
    let roller = &st["rollers"][0];
    assert_eq!(
        keys(roller),
        [
            "state",
            "power",
            "is_valid",
            "safety_switch",
            "overtemperature",
            "stop_reason",
            "last_direction",
            "current_pos",
            "calibrating",
            "positioning"
        ]
    );
    assert_eq!(
        (&roller["state"], &roller["current_pos"]),
        (&json!("stop"), &json!(0))
    );

    let r = get(p, "/relay/0?turn=on");
    assert_eq!(r.status, 400, "relays are refused in roller mode");
    let r = get_json(p, "/roller/0?go=open");
    assert_eq!(
        (&r["state"], &r["last_direction"]),
        (&json!("open"), &json!("open"))
    );
    assert_eq!(r["power"].as_f64(), Some(100.0));
    clock.advance(secs(10.0));
    let st = get_json(p, "/status");
    assert_eq!(st["rollers"][0]["current_pos"], 50);
    // The opening winding's meter carries the load, the closing one does not.
    assert_eq!(
        (
            st["meters"][0]["power"].as_f64(),
            st["meters"][1]["power"].as_f64()
        ),
        (Some(100.0), Some(0.0))
    );
    let r = get_json(p, "/roller/0?go=to_pos&roller_pos=30");
    assert_eq!(r["state"], "close");
    clock.advance(secs(4.0));
    assert_eq!(get_json(p, "/roller/0")["current_pos"], 30);
    assert_eq!(get_json(p, "/roller/0")["state"], "stop");
    assert_eq!(get_json(p, "/roller/0?roller_pos=40")["state"], "open");
    let r = get_json(p, "/roller/0?go=stop");
    assert_eq!(
        (&r["state"], &r["current_pos"]),
        (&json!("stop"), &json!(30))
    );

    for bad in [
        "/roller/0?go=fly",
        "/roller/0?go=to_pos",
        "/roller/0?roller_pos=101",
    ] {
        assert_eq!(get(p, bad).status, 400, "{bad}");
    }
    assert_eq!(get(p, "/roller/1").status, 404);
    emu.set_cover_calibrated(0, 0, false);
    let r = get(p, "/roller/0?go=to_pos&roller_pos=50");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("calibrated"), "{}", r.text());
    assert_eq!(get_json(p, "/roller/0")["positioning"], false);
    assert_eq!(get_json(p, "/roller/0?go=close")["state"], "close");

    // Relay mode: relays work, the roller endpoint is refused.
    assert_eq!(get(emu.port(1), "/roller/0?go=open").status, 400);
    assert_eq!(get_json(emu.port(1), "/relay/0?turn=on")["ison"], true);
    // Switching the mode at runtime.
    emu.set_profile(1, "roller").unwrap();
    assert_eq!(get_json(emu.port(1), "/settings")["mode"], "roller");
    assert!(get_json(emu.port(1), "/status").get("rollers").is_some());
}

// ---- 4. Tasmota shutters ----

#[test]
fn tasmota_shutters_move_and_report() {
    let mut spec = DeviceSpec::new("Tasmota");
    spec.shutters = 1;
    let (emu, clock) = manual(vec![spec]);
    let p = emu.port(0);
    assert_eq!(tasmota(p, "Status 0")["StatusSTS"]["POWER1"], "OFF");
    let r = tasmota(p, "ShutterOpen1");
    assert_eq!(
        r,
        json!({"Shutter1": {"Position": 0, "Direction": 1, "Target": 100, "Tilt": 0}})
    );
    // Shutter 1 drives relay 1 (open) and relay 2 (close).
    assert!(emu.output(0, 0) && !emu.output(0, 1));
    clock.advance(secs(10.0));
    let sns = &tasmota(p, "Status 10")["StatusSNS"];
    assert_eq!(
        sns["Shutter1"],
        json!({"Position": 50, "Direction": 1, "Target": 100, "Tilt": 0})
    );
    let r = tasmota(p, "ShutterStop1");
    assert_eq!(r["Shutter1"]["Direction"], 0);
    assert_eq!(r["Shutter1"]["Position"], 50);
    assert!(!emu.output(0, 0) && !emu.output(0, 1));
    assert_eq!(tasmota(p, "ShutterStop1"), json!({"ShutterStop": "Done"}));

    let r = tasmota(p, "ShutterPosition1 20");
    assert_eq!(
        r["Shutter1"],
        json!({"Position": 50, "Direction": -1, "Target": 20, "Tilt": 0})
    );
    assert!(emu.output(0, 1));
    clock.advance(secs(6.0));
    let sns = &tasmota(p, "Status 10")["StatusSNS"];
    assert_eq!(
        sns["Shutter1"],
        json!({"Position": 20, "Direction": 0, "Target": 20, "Tilt": 0})
    );
    assert!(!emu.output(0, 1), "the relay switches off with the motor");
    assert_eq!(tasmota(p, "ShutterPosition1")["Shutter1"]["Position"], 20);
    assert_eq!(tasmota(p, "ShutterClose")["Shutter1"]["Direction"], -1);
    clock.advance(secs(20.0));
    assert_eq!(emu.cover(0, 0).state, CoverState::Closed);
    assert_eq!(tasmota(p, "ShutterPosition1 UP")["Shutter1"]["Target"], 100);
    assert_eq!(tasmota(p, "ShutterOpen2"), json!({"Command": "Unknown"}));
    assert_eq!(tasmota(p, "ShutterPosition1 x,5")["Shutter1"]["Target"], 0);

    let mut bad = DeviceSpec::new("Tasmota");
    bad.shutters = 2;
    bad.outputs = Some(2);
    let e = Emulator::start(vec![bad], &ModelLibrary::embedded())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("need 4 relays"), "{e}");
    let mut shelly = DeviceSpec::new("Shelly2PMG3");
    shelly.shutters = 1;
    assert!(Emulator::start(vec![shelly], &ModelLibrary::embedded()).is_err());
}

// ---- 5. energy fields ----

fn switch0(model: &str) -> Value {
    let emu = Emulator::start(vec![DeviceSpec::new(model)], &ModelLibrary::embedded()).unwrap();
    emu.set_output(0, 0, true);
    rpc(emu.port(0), "Switch.GetStatus", json!({"id": 0}))
}

#[test]
fn switches_report_the_meter_fields_of_their_device_line() {
    let plus = switch0("ShellyPlus1PM");
    assert!(plus.get("apower").is_some() && plus.get("aenergy").is_some());
    for k in ["freq", "pf", "ret_aenergy"] {
        assert!(plus.get(k).is_none(), "Plus 1PM has no {k}");
    }
    let g3 = switch0("Shelly1PMG3");
    assert!(g3.get("freq").is_some() && g3.get("ret_aenergy").is_some());
    assert!(g3.get("pf").is_none());
    let g4 = switch0("Shelly2PMG4");
    for k in ["freq", "pf", "ret_aenergy"] {
        assert!(g4.get(k).is_some(), "2PM Gen4 {k}");
    }
    assert!(switch0("ShellyPro4PM").get("pf").is_some());
    assert!(
        switch0("Shelly1G3").get("apower").is_none(),
        "no meter, no power"
    );
}

#[test]
fn energy_components_carry_frequency_apparent_power_and_returned_energy() {
    let (emu, clock) = manual(vec![
        DeviceSpec::new("ShellyPMMiniG3"),
        DeviceSpec::new("ShellyEMG3"),
        DeviceSpec::new("ShellyPro3EM"),
        DeviceSpec::new("Shelly1PMG4"),
    ]);
    // Export: returned energy grows, drawn energy does not.
    emu.set_load(0, 0, -1800.0);
    emu.set_frequency(0, 0, 60.0);
    clock.advance(secs(2.0));
    let pm = rpc(emu.port(0), "PM1.GetStatus", json!({"id": 0}));
    assert_eq!(pm["freq"], json!(60));
    assert!(
        close(pm["ret_aenergy"]["total"].as_f64().unwrap(), 1.0, 1e-6),
        "{pm}"
    );
    assert_eq!(pm["aenergy"]["total"], json!(0));

    emu.set_load(1, 1, -3600.0);
    emu.set_frequency(1, 1, 49.9);
    clock.advance(secs(1.0));
    let st = rpc(emu.port(1), "Shelly.GetStatus", json!({}));
    let em1 = &st["em1:1"];
    assert_eq!(em1["freq"], json!(49.9));
    assert!(em1["aprt_power"].as_f64().unwrap() > 0.0);
    assert!(close(
        st["em1data:1"]["total_act_ret_energy"].as_f64().unwrap(),
        1.0,
        0.01
    ));
    emu.set_frequency(2, 0, 50.2);
    emu.set_load(2, 2, -3600.0);
    clock.advance(secs(1.0));
    let st = rpc(emu.port(2), "Shelly.GetStatus", json!({}));
    let em = &st["em:0"];
    assert_eq!(em["a_freq"], json!(50.2));
    for k in [
        "a_aprt_power",
        "b_aprt_power",
        "c_aprt_power",
        "total_aprt_power",
    ] {
        assert!(em[k].is_number(), "em {k}");
    }
    let d = &st["emdata:0"];
    assert!(close(
        d["c_total_act_ret_energy"].as_f64().unwrap(),
        1.0,
        0.01
    ));
    assert_eq!(d["total_act_ret"], d["c_total_act_ret_energy"]);

    emu.set_output(3, 0, true);
    emu.set_load(3, 0, -3600.0);
    clock.advance(secs(1.0));
    let sw = rpc(emu.port(3), "Switch.GetStatus", json!({"id": 0}));
    assert!(close(
        sw["ret_aenergy"]["total"].as_f64().unwrap(),
        1.0,
        1e-6
    ));
    assert_eq!(
        post(emu.admin_port(), "/devices/3/frequency?id=0&hz=59.5").status,
        200
    );
    assert_eq!(
        rpc(emu.port(3), "Switch.GetStatus", json!({"id": 0}))["freq"],
        json!(59.5)
    );
    assert_eq!(
        post(emu.admin_port(), "/devices/3/frequency?id=0&hz=nan").status,
        400
    );
}

#[test]
fn the_monophase_profile_has_three_single_phase_meters() {
    let emu = Emulator::start(
        vec![
            with_profile("ShellyPro3EM", "monophase"),
            with_profile("Shelly3EM63G3", "monophase"),
        ],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    for d in 0..2 {
        let p = emu.port(d);
        assert_eq!(get_json(p, "/shelly")["profile"], "monophase");
        let st = rpc(p, "Shelly.GetStatus", json!({}));
        let comps: Vec<String> = keys(&st).into_iter().filter(|k| k.contains(':')).collect();
        assert_eq!(
            comps,
            [
                "em1:0",
                "em1:1",
                "em1:2",
                "em1data:0",
                "em1data:1",
                "em1data:2"
            ]
        );
        assert_eq!(rpc(p, "EM1.GetStatus", json!({"id": 2}))["id"], 2);
        assert_eq!(rpc_err(p, "EM.GetStatus", json!({"id": 0})).0, -105);
        let cfg = rpc(p, "Shelly.GetConfig", json!({}));
        assert!(cfg.get("em1:2").is_some() && cfg.get("em:0").is_none());
    }
    emu.set_profile(0, "triphase").unwrap();
    let st = rpc(emu.port(0), "Shelly.GetStatus", json!({}));
    assert!(st.get("em:0").is_some() && st.get("em1:0").is_none());
    assert_eq!(
        rpc_err(emu.port(0), "EM1.GetStatus", json!({"id": 0})).0,
        -105
    );
}

// ---- 6. sensors ----

fn addons() -> Vec<AddonSensor> {
    vec![
        AddonSensor::new("Bathroom", SensorQuantity::Humidity),
        AddonSensor::new("Tank", SensorQuantity::Voltage),
    ]
}

#[test]
fn rpc_addon_humidity_and_voltmeter_beside_probes() {
    let mut spec = DeviceSpec::new("Shelly1G3");
    spec.probes = vec!["Roof".into()];
    spec.sensors = addons();
    let emu = Emulator::start(vec![spec], &ModelLibrary::embedded()).unwrap();
    let p = emu.port(0);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    let comps: Vec<String> = keys(&st)
        .into_iter()
        .filter(|k| k.contains(':') && !k.starts_with("input") && !k.starts_with("switch"))
        .collect();
    assert_eq!(
        comps,
        [
            "humidity:101",
            "temperature:100",
            "temperature:101",
            "voltmeter:100"
        ],
        "a DHT22 is a temperature and a humidity with one id"
    );
    assert_eq!(keys(&st["humidity:101"]), ["id", "rh"]);
    assert_eq!(keys(&st["voltmeter:100"]), ["id", "voltage"]);
    let cfg = rpc(p, "Shelly.GetConfig", json!({}));
    assert_eq!(cfg["temperature:100"]["name"], "Roof");
    assert_eq!(cfg["temperature:101"]["name"], "Bathroom");
    assert_eq!(cfg["humidity:101"]["name"], "Bathroom");
    assert_eq!(cfg["voltmeter:100"]["name"], "Tank");
    assert_eq!(cfg["sys"]["device"]["addon_type"], "sensor");

    emu.set_sensor(0, SensorQuantity::Humidity, 0, Some(63.25));
    emu.set_sensor(0, SensorQuantity::Voltage, 0, Some(11.8));
    emu.set_sensor(0, SensorQuantity::Temperature, 1, Some(19.0));
    assert_eq!(
        rpc(p, "Humidity.GetStatus", json!({"id": 101})),
        json!({"id": 101, "rh": 63.3})
    );
    assert_eq!(
        rpc(p, "Voltmeter.GetStatus", json!({"id": 100})),
        json!({"id": 100, "voltage": 11.8})
    );
    assert_eq!(
        rpc(p, "Temperature.GetStatus", json!({"id": 101}))["tC"],
        json!(19)
    );
    assert_eq!(
        rpc(p, "Voltmeter.GetConfig", json!({"id": 100}))["name"],
        "Tank"
    );
    assert_eq!(rpc_err(p, "Humidity.GetStatus", json!({"id": 100})).0, -105);
    let a = emu.admin_port();
    assert_eq!(
        post(a, "/devices/0/sensor?quantity=humidity&id=0&value=40").status,
        200
    );
    assert_eq!(
        rpc(p, "Humidity.GetStatus", json!({"id": 101}))["rh"],
        json!(40)
    );
    assert_eq!(
        post(a, "/devices/0/sensor?quantity=voltage&id=0").status,
        200
    );
    assert_eq!(
        rpc(p, "Voltmeter.GetStatus", json!({"id": 100}))["voltage"],
        Value::Null
    );
    assert_eq!(
        post(a, "/devices/0/sensor?quantity=pressure&id=0").status,
        400
    );
    assert_eq!(
        post(a, "/devices/0/sensor?quantity=humidity&id=5").status,
        400
    );
    let types = rpc(p, "Webhook.ListSupported", json!({}))["types"].clone();
    assert!(types.get("humidity.change").is_some() && types.get("voltmeter.change").is_some());
}

#[test]
fn gen1_and_tasmota_humidity_sensors() {
    let mut g1 = DeviceSpec::new("Shelly1");
    g1.sensors = vec![AddonSensor::new("Cellar", SensorQuantity::Humidity)];
    let mut t = DeviceSpec::new("Tasmota");
    t.probes = vec!["Pipe".into()];
    t.sensors = vec![
        AddonSensor::new("Hall", SensorQuantity::Humidity),
        AddonSensor::new("BME280", SensorQuantity::Humidity),
        AddonSensor::new("si7021", SensorQuantity::Humidity),
    ];
    let emu = Emulator::start(vec![g1, t], &ModelLibrary::embedded()).unwrap();
    emu.set_sensor(0, SensorQuantity::Humidity, 0, Some(71.5));
    let st = get_json(emu.port(0), "/status");
    assert_eq!(st["ext_temperature"]["0"]["tC"].as_f64(), Some(22.0));
    assert_eq!(st["ext_humidity"]["0"]["hum"].as_f64(), Some(71.5));
    assert_eq!(
        st["ext_humidity"]["0"]["hwID"],
        st["ext_temperature"]["0"]["hwID"]
    );
    assert!(get_json(emu.port(0), "/settings")["ext_humidity"]["0"].is_object());

    let sns = tasmota(emu.port(1), "Status 8")["StatusSNS"].clone();
    for k in ["AM2301", "BME280", "SI7021"] {
        let o = &sns[k];
        assert!(
            o["Temperature"].is_number() && o["Humidity"].is_number() && o["DewPoint"].is_number(),
            "{k}: {sns}"
        );
    }
    assert!(sns["BME280"]["Pressure"].is_number());
    assert_eq!(sns["PressureUnit"], "hPa");
    assert_eq!(sns["DS18B20"]["Id"], "Pipe");
    emu.set_sensor(1, SensorQuantity::Humidity, 1, None);
    let sns = tasmota(emu.port(1), "Status 8")["StatusSNS"].clone();
    assert!(sns.get("BME280").is_none(), "a silent sensor is left out");

    let mut volt = DeviceSpec::new("Tasmota");
    volt.sensors = vec![AddonSensor::new("Tank", SensorQuantity::Voltage)];
    assert!(Emulator::start(vec![volt], &ModelLibrary::embedded()).is_err());
}

#[test]
fn an_ht_gen3_has_builtin_temperature_humidity_and_battery() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyHTG3")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let p = emu.port(0);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    let comps: Vec<String> = keys(&st).into_iter().filter(|k| k.contains(':')).collect();
    assert_eq!(comps, ["devicepower:0", "humidity:0", "temperature:0"]);
    assert_eq!(keys(&st["devicepower:0"]), ["id", "battery", "external"]);
    emu.set_sensor(0, SensorQuantity::Temperature, 0, Some(18.4));
    emu.set_sensor(0, SensorQuantity::Humidity, 0, Some(38.9));
    emu.set_battery(0, 65.0);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert_eq!(
        st["temperature:0"],
        json!({"id": 0, "tC": 18.4, "tF": 65.1})
    );
    assert_eq!(st["humidity:0"], json!({"id": 0, "rh": 38.9}));
    assert_eq!(st["devicepower:0"]["battery"]["percent"], 65);
    assert_eq!(
        rpc(p, "DevicePower.GetStatus", json!({"id": 0})),
        st["devicepower:0"]
    );
    assert_eq!(
        rpc(p, "Temperature.GetConfig", json!({"id": 0}))["name"],
        Value::Null
    );
    assert_eq!(
        post(emu.admin_port(), "/devices/0/battery?percent=12").status,
        200
    );
    assert_eq!(
        rpc(p, "DevicePower.GetStatus", json!({"id": 0}))["battery"]["percent"],
        12
    );
    assert_eq!(
        post(emu.admin_port(), "/devices/0/battery?percent=120").status,
        400
    );
    assert!(st.get("switch:0").is_none());
}

// ---- 7. input-only devices ----

#[test]
fn an_i4_has_four_inputs_that_can_be_buttons() {
    let emu = Emulator::start(
        vec![
            DeviceSpec::new("ShellyPlusI4"),
            DeviceSpec::new("ShellyI4G3"),
        ],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let p = emu.port(0);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    let comps: Vec<String> = keys(&st).into_iter().filter(|k| k.contains(':')).collect();
    assert_eq!(comps, ["input:0", "input:1", "input:2", "input:3"]);
    assert_eq!(
        rpc_err(p, "Switch.Set", json!({"id": 0, "on": true})).0,
        404
    );
    assert_eq!(
        rpc(
            p,
            "Input.SetConfig",
            json!({"id": 2, "config": {"type": "button"}})
        ),
        json!({"restart_required": false})
    );
    assert_eq!(
        rpc(p, "Input.GetStatus", json!({"id": 2})),
        json!({"id": 2, "state": null}),
        "a button has no state"
    );
    assert_eq!(
        rpc(p, "Input.GetConfig", json!({"id": 2}))["type"],
        "button"
    );
    assert_eq!(rpc(p, "Input.GetStatus", json!({"id": 1}))["state"], false);
    assert_eq!(
        rpc_err(
            p,
            "Input.SetConfig",
            json!({"id": 2, "config": {"type": "dial"}})
        )
        .0,
        -103
    );
    let types = rpc(p, "Webhook.ListSupported", json!({}))["types"].clone();
    for e in [
        "input.button_push",
        "input.button_longpush",
        "input.button_doublepush",
        "input.button_triplepush",
    ] {
        assert!(types.get(e).is_some(), "{e}");
    }
    assert!(types.get("switch.on").is_none());

    let (hook_port, rx) = common::raw_http::hook_listener();
    for (event, path) in [
        ("input.button_push", "push"),
        ("input.button_longpush", "long"),
    ] {
        rpc(
            p,
            "Webhook.Create",
            json!({"cid": 2, "event": event, "urls": [format!("http://127.0.0.1:{hook_port}/{path}")]}),
        );
    }
    assert_eq!(emu.press_button(0, 2, Press::Single).unwrap(), 1);
    assert!(
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap()
            .contains("/push")
    );
    let r = post(emu.admin_port(), "/devices/0/press?id=2&kind=long");
    assert_eq!((r.status, r.json()), (200, json!({"called": 1})));
    assert!(
        rx.recv_timeout(Duration::from_secs(5))
            .unwrap()
            .contains("/long")
    );
    assert_eq!(
        emu.press_button(0, 2, Press::Double).unwrap(),
        0,
        "no hook for it"
    );
    let e = emu
        .press_button(0, 1, Press::Single)
        .unwrap_err()
        .to_string();
    assert!(e.contains("switch"), "{e}");
    assert_eq!(post(emu.admin_port(), "/devices/0/press?id=1").status, 400);

    emu.set_input_type(1, 0, InputType::Button);
    assert_eq!(
        rpc(emu.port(1), "Input.GetStatus", json!({"id": 0}))["state"],
        Value::Null
    );
    assert_eq!(
        post(emu.admin_port(), "/devices/1/input_type?id=0&type=switch").status,
        200
    );
    assert_eq!(
        rpc(emu.port(1), "Input.GetStatus", json!({"id": 0}))["state"],
        false
    );
}

// ---- 8. dimmers ----

#[test]
fn rpc_dimmer_lights() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyProDimmer1PM")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let p = emu.port(0);
    let st = rpc(p, "Shelly.GetStatus", json!({}));
    assert!(st.get("switch:0").is_none());
    let l = &st["light:0"];
    assert_eq!(
        keys(l),
        ["id", "source", "output", "brightness", "temperature"]
    );
    assert_eq!(
        (&l["output"], &l["brightness"]),
        (&json!(false), &json!(50))
    );
    assert_eq!(
        rpc(
            p,
            "Light.Set",
            json!({"id": 0, "on": true, "brightness": 30})
        ),
        Value::Null
    );
    let l = rpc(p, "Light.GetStatus", json!({"id": 0}));
    assert_eq!(
        (&l["output"], &l["brightness"], &l["source"]),
        (&json!(true), &json!(30), &json!("HTTP_in"))
    );
    assert_eq!(emu.light(0, 0), (true, 30));
    rpc(p, "Light.Set", json!({"id": 0, "brightness": 80}));
    assert_eq!(
        emu.light(0, 0),
        (true, 80),
        "brightness alone keeps the output"
    );
    rpc(p, "Light.Toggle", json!({"id": 0}));
    assert_eq!(emu.light(0, 0), (false, 80));
    assert_eq!(rpc_err(p, "Light.Set", json!({"id": 0})).0, -103);
    assert_eq!(
        rpc_err(p, "Light.Set", json!({"id": 0, "brightness": 120})).0,
        -103
    );
    assert_eq!(
        rpc_err(p, "Light.Set", json!({"id": 1, "on": true})).0,
        -105
    );
    assert_eq!(
        rpc_err(p, "Switch.Set", json!({"id": 0, "on": true})).0,
        404
    );
    assert!(rpc(p, "Light.GetConfig", json!({"id": 0}))["transition_duration"].is_number());
    let types = rpc(p, "Webhook.ListSupported", json!({}))["types"].clone();
    assert!(types.get("light.on").is_some() && types.get("switch.on").is_none());
    let r = post(
        emu.admin_port(),
        "/devices/0/light?id=0&state=true&brightness=5",
    );
    assert_eq!(
        (r.status, r.json()),
        (200, json!({"state": true, "brightness": 5}))
    );
    assert_eq!(
        rpc(p, "Light.GetStatus", json!({"id": 0}))["source"],
        "button",
        "a local change"
    );
}

#[test]
fn gen1_dimmer_lights() {
    let emu = Emulator::start(
        vec![DeviceSpec::new("ShellyDimmer2")],
        &ModelLibrary::embedded(),
    )
    .unwrap();
    let p = emu.port(0);
    let l = get_json(p, "/light/0?turn=on&brightness=30");
    assert_eq!(
        (&l["ison"], &l["brightness"], &l["source"]),
        (&json!(true), &json!(30), &json!("http"))
    );
    let st = get_json(p, "/status");
    assert!(st.get("relays").is_none());
    assert_eq!(st["lights"][0]["brightness"], 30);
    assert_eq!(get_json(p, "/light/0?turn=toggle")["ison"], false);
    assert_eq!(get_json(p, "/light/0")["brightness"], 30);
    assert_eq!(get(p, "/light/0?brightness=101").status, 400);
    assert_eq!(get(p, "/light/0?turn=up").status, 400);
    assert_eq!(get(p, "/light/1").status, 404);
    assert_eq!(get(p, "/relay/0?turn=on").status, 404);
    assert!(get_json(p, "/settings")["lights"].is_array());
    emu.set_light(0, 0, true, 75);
    assert_eq!(get_json(p, "/status")["lights"][0]["brightness"], 75);
}
