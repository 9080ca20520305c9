//! The emulator's profiles and richer components over real HTTP: switch/cover profiles, covers moving on the
//! manual clock, Gen1 rollers, Tasmota shutters, per-component energy fields, the Pro 3EM monophase profile,
//! sensors, button inputs and dimmers.

use std::time::Duration;

use serde_json::{Value, json};
use smartdev::ModelLibrary;
use smartdev::emulator::{CoverState, DeviceSpec, EmuClock, Emulator};

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
        -114,
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
    assert_eq!(rpc_err(p, "Cover.Fly", json!({"id": 0})).0, -114);
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
