//! Emulated devices as MQTT clients of a real Mosquitto (`DeviceSpec::mqtt`), each test with its own broker:
//! Shelly Gen2+ JSON-RPC over MQTT (requests, notifications, `online` and the last will), Tasmota commands and
//! telemetry on the emulator clock, reconnecting after a broker restart or a hostile packet, a broker with a
//! login and one with TLS.

mod common;

use std::time::Duration;

use common::eventually;
use common::mosquitto::{Broker, BrokerOptions};
use serde_json::{Value, json};
use smartdev::ModelLibrary;
use smartdev::emulator::{DeviceSpec, EmuClock, Emulator, MqttSpec};

/// A hang guard, never a timing assertion.
const LIMIT: Duration = Duration::from_secs(15);

fn with_mqtt(model: &str, spec: MqttSpec) -> DeviceSpec {
    let mut d = DeviceSpec::new(model);
    d.mqtt = Some(spec);
    d
}

fn start(specs: Vec<DeviceSpec>) -> Emulator {
    let emu = Emulator::start(specs, &ModelLibrary::embedded()).unwrap();
    for i in 0..emu.len() {
        assert!(
            eventually(LIMIT, || emu.mqtt_connected(i)),
            "device {i} did not connect to its broker"
        );
    }
    emu
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Publishes an RPC request on `<prefix>/rpc` and returns the response frame from `<src>/rpc`.
fn call(b: &Broker, prefix: &str, src: &str, id: u64, method: &str, params: Value) -> Value {
    let w = b.watch(&format!("{src}/rpc"));
    let req = json!({"id": id, "src": src, "method": method, "params": params});
    b.publish(&format!("{prefix}/rpc"), &req.to_string(), false);
    let answer = w
        .next_on(&format!("{src}/rpc"), LIMIT)
        .unwrap_or_else(|| panic!("no answer to {method} on {src}/rpc"));
    json_of(&answer)
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_gen2_device_answers_rpc_over_mqtt_with_the_http_dispatcher() {
    let b = Broker::start();
    let emu = start(vec![with_mqtt(
        "ShellyPlus1PM",
        MqttSpec::new(&b.address()),
    )]);
    let id = emu.device_id(0).to_string();
    assert_eq!(
        emu.mqtt_topic(0),
        Some(id.as_str()),
        "the prefix defaults to the id"
    );
    assert_eq!(emu.mqtt_client_id(0), id);

    let info = call(&b, &id, "smartdev-t1", 7, "Shelly.GetDeviceInfo", json!({}));
    assert_eq!(info["id"], 7);
    assert_eq!(info["src"], json!(id));
    assert_eq!(info["dst"], "smartdev-t1");
    assert_eq!(info["result"]["id"], json!(id));
    assert_eq!(info["result"]["model"], "SNSW-001P16EU");

    // A `src` with levels is answered on its own topic (as shellies_discovery/<name> is).
    let cfg = call(&b, &id, "site/ctl-2", 8, "MQTT.GetConfig", json!({}));
    let cfg = &cfg["result"];
    assert_eq!(cfg["enable"], true);
    assert_eq!(cfg["server"], json!(b.address()));
    assert_eq!(cfg["topic_prefix"], json!(id));
    assert_eq!(cfg["client_id"], json!(id));
    assert_eq!(
        (cfg["rpc_ntf"].clone(), cfg["status_ntf"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(cfg["ssl_ca"], Value::Null);
    let st = call(&b, &id, "smartdev-t1", 9, "MQTT.GetStatus", json!(null));
    assert_eq!(st["result"], json!({"connected": true}));

    // The same dispatcher as HTTP: errors included, and the request is counted like one.
    let err = call(
        &b,
        &id,
        "smartdev-t1",
        10,
        "Switch.Set",
        json!({"id": 5, "on": true}),
    );
    assert!(err["error"]["code"].is_i64(), "{err}");
    assert!(
        emu.counts(0)
            .get("rpc Shelly.GetDeviceInfo")
            .is_some_and(|&n| n >= 1)
    );
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn switching_over_mqtt_publishes_notify_status_on_events_rpc() {
    let b = Broker::start();
    let mut spec = MqttSpec::new(&b.address());
    spec.topic = Some("garage/plug".into());
    let emu = start(vec![with_mqtt("ShellyPlus1PM", spec)]);
    let id = emu.device_id(0).to_string();
    let events = b.watch("garage/plug/events/rpc");

    let answer = call(
        &b,
        "garage/plug",
        "ctl",
        1,
        "Switch.Set",
        json!({"id": 0, "on": true}),
    );
    assert_eq!(answer["result"], json!({"was_on": false}));
    assert!(emu.output(0, 0));
    let note = loop {
        let n = json_of(
            &events
                .next_on("garage/plug/events/rpc", LIMIT)
                .expect("a notification"),
        );
        if n["method"] == "NotifyStatus" && n["params"]["switch:0"]["output"] == true {
            break n;
        }
    };
    assert_eq!(note["src"], json!(id));
    assert_eq!(note["dst"], "garage/plug/events");
    assert!(note["params"]["ts"].is_number());

    // A change made on the device (its button) is notified too, and an event as NotifyEvent.
    emu.set_output(0, 0, false);
    loop {
        let n = json_of(
            &events
                .next_on("garage/plug/events/rpc", LIMIT)
                .expect("a notification"),
        );
        if n["method"] == "NotifyStatus" && n["params"]["switch:0"]["output"] == false {
            break;
        }
    }
    emu.fire_event(0, "input.button_push", 0);
    loop {
        let n = json_of(
            &events
                .next_on("garage/plug/events/rpc", LIMIT)
                .expect("an event"),
        );
        if n["method"] == "NotifyEvent" {
            assert_eq!(n["params"]["events"][0]["event"], "single_push");
            assert_eq!(n["params"]["events"][0]["component"], "input:0");
            break;
        }
    }
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn online_is_retained_and_the_will_says_false_when_the_connection_drops() {
    let b = Broker::start();
    let emu = start(vec![with_mqtt(
        "ShellyPlus1PM",
        MqttSpec::new(&b.address()),
    )]);
    let topic = format!("{}/online", emu.device_id(0));
    // Subscribed after the device announced itself: the retained `true` is what a late client sees.
    let w = b.watch(&topic);
    assert_eq!(w.next_on(&topic, LIMIT).as_deref(), Some("true"));
    emu.mqtt_drop(0);
    assert_eq!(
        w.next_on(&topic, LIMIT).as_deref(),
        Some("false"),
        "the will"
    );
    assert_eq!(
        w.next_on(&topic, LIMIT).as_deref(),
        Some("true"),
        "back after its back-off"
    );
    assert!(eventually(LIMIT, || emu.mqtt_connected(0)));
    assert_eq!(emu.mqtt_connects(0), 2);

    // Paused, it stays away (the will again) until resumed.
    emu.mqtt_pause(0, true);
    assert_eq!(w.next_on(&topic, LIMIT).as_deref(), Some("false"));
    assert!(eventually(LIMIT, || !emu.mqtt_connected(0)));
    emu.mqtt_pause(0, false);
    assert_eq!(w.next_on(&topic, LIMIT).as_deref(), Some("true"));
    assert!(eventually(LIMIT, || emu.mqtt_connected(0)));
    assert_eq!(emu.mqtt_connects(0), 3);
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_device_reconnects_after_the_broker_restarts_and_announces_again() {
    let mut b = Broker::start();
    let emu = start(vec![with_mqtt(
        "ShellyPlus2PM",
        MqttSpec::new(&b.address()),
    )]);
    let id = emu.device_id(0).to_string();
    b.kill();
    assert!(eventually(LIMIT, || !emu.mqtt_connected(0)));
    b.restart();
    assert!(eventually(LIMIT, || emu.mqtt_connected(0)), "no reconnect");
    // The broker kept nothing (no persistence): `online` is there because the device said it again.
    let online = format!("{id}/online");
    assert_eq!(
        b.watch(&online).next_on(&online, LIMIT).as_deref(),
        Some("true")
    );
    let answer = call(
        &b,
        &id,
        "ctl",
        3,
        "Switch.Set",
        json!({"id": 1, "on": true}),
    );
    assert_eq!(answer["result"], json!({"was_on": false}));
    assert!(emu.output(0, 1));
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_packet_above_the_limit_closes_the_connection_and_the_device_comes_back() {
    let b = Broker::start();
    let emu = start(vec![with_mqtt(
        "ShellyPlus1PM",
        MqttSpec::new(&b.address()),
    )]);
    let id = emu.device_id(0).to_string();
    // 100 KB on the device's request topic: the broker delivers it, the device refuses it unread.
    b.publish(&format!("{id}/rpc"), &"x".repeat(100_000), false);
    assert!(eventually(LIMIT, || emu.mqtt_connects(0) == 2 && emu.mqtt_connected(0)));
    // Garbage that fits is dropped without harm; the device still answers.
    b.publish(&format!("{id}/rpc"), "{\"id\":1,\"src\":\"#\"}", false);
    b.publish(&format!("{id}/rpc"), "[1,2", false);
    let answer = call(&b, &id, "ctl", 4, "Shelly.GetStatus", json!({}));
    assert_eq!(answer["result"]["mqtt"], json!({"connected": true}));
    assert_eq!(emu.mqtt_connects(0), 2);
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_device_logs_in_to_a_broker_with_a_password() {
    let b = Broker::start_with(BrokerOptions {
        login: Some(("dev".into(), "s3cret".into())),
        ..Default::default()
    });
    let mut spec = MqttSpec::new(&b.address());
    spec.user = Some("dev".into());
    spec.password = Some("s3cret".into());
    let emu = start(vec![with_mqtt("ShellyPlus1PM", spec)]);
    let id = emu.device_id(0).to_string();
    let cfg = call(&b, &id, "ctl", 1, "MQTT.GetConfig", json!({}));
    assert_eq!(cfg["result"]["user"], "dev");
    assert!(
        cfg["result"].get("pass").is_none(),
        "the password is never returned"
    );
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_device_connects_over_tls_checking_the_brokers_ca() {
    let b = Broker::start_with(BrokerOptions {
        tls: true,
        ..Default::default()
    });
    let mut spec = MqttSpec::new(&b.address());
    spec.ca_file = Some(b.ca_file());
    let emu = start(vec![with_mqtt("ShellyPlus1PM", spec)]);
    let id = emu.device_id(0).to_string();
    let cfg = call(&b, &id, "ctl", 1, "MQTT.GetConfig", json!({}));
    assert_eq!(cfg["result"]["ssl_ca"], "user_ca.pem");
    let answer = call(&b, &id, "ctl", 2, "Switch.Toggle", json!({"id": 0}));
    assert_eq!(answer["result"], json!({"was_on": false}));
}

#[test]
fn mqtt_options_that_cannot_work_are_refused_at_start() {
    let lib = ModelLibrary::embedded();
    let refused = |d: DeviceSpec| match Emulator::start(vec![d], &lib) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let mut sleepy = with_mqtt("ShellyHTG3", MqttSpec::new("127.0.0.1:1883"));
    sleepy.sleep = Some(Duration::from_secs(60));
    let e = refused(sleepy);
    assert!(
        e.contains("mqtt and sleep together are not emulated"),
        "{e}"
    );
    let mut bad = MqttSpec::new("127.0.0.1:1883");
    bad.topic = Some("a/#".into());
    let e = refused(with_mqtt("ShellyPlus1PM", bad));
    assert!(e.contains("cannot be a topic prefix"), "{e}");
    let e = refused(with_mqtt("Tasmota", MqttSpec::new("127.0.0.1:port")));
    assert!(e.contains("not a port number"), "{e}");
    let mut ca = MqttSpec::new("127.0.0.1:8883");
    ca.ca_file = Some("/nonexistent/ca.pem".into());
    let e = refused(with_mqtt("ShellyPlus1PM", ca));
    assert!(
        e.contains("mqtt_ca") && e.contains("/nonexistent/ca.pem"),
        "{e}"
    );
}

#[test]
fn a_device_without_a_broker_keeps_serving_http_and_reports_mqtt_off() {
    let emu = Emulator::start_with_clock(
        vec![DeviceSpec::new("ShellyPlus1PM")],
        &ModelLibrary::embedded(),
        EmuClock::manual(),
    )
    .unwrap();
    assert!(!emu.mqtt_connected(0));
    assert_eq!(emu.mqtt_topic(0), None);
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn the_admin_endpoint_shows_and_drives_the_mqtt_client() {
    use common::raw_http::request;
    let b = Broker::start();
    let mut spec = MqttSpec::new(&b.address());
    spec.user = Some("nobody-checks".into());
    spec.password = Some("hidden".into());
    let emu = start(vec![with_mqtt("ShellyPlus1PM", spec)]);
    let admin = emu.admin_port();
    let state = request(admin, "GET", "/devices/0/mqtt", None).json();
    assert_eq!(state["connected"], true);
    assert_eq!(state["topic"], json!(emu.device_id(0)));
    assert_eq!(state["connects"], 1);
    assert!(!state.to_string().contains("hidden"), "{state}");

    let online = format!("{}/online", emu.device_id(0));
    let w = b.watch(&online);
    assert_eq!(w.next_on(&online, LIMIT).as_deref(), Some("true"));
    let r = request(admin, "POST", "/devices/0/mqtt?action=pause", None);
    assert_eq!(r.status, 200);
    assert_eq!(w.next_on(&online, LIMIT).as_deref(), Some("false"));
    assert!(eventually(LIMIT, || {
        request(admin, "GET", "/devices/0/mqtt", None).json()["connected"] == false
    }));
    assert_eq!(
        request(admin, "GET", "/devices/0/mqtt", None).json()["paused"],
        true
    );
    request(admin, "POST", "/devices/0/mqtt?action=resume", None);
    assert_eq!(w.next_on(&online, LIMIT).as_deref(), Some("true"));
    request(admin, "POST", "/devices/0/mqtt?action=drop", None);
    assert_eq!(w.next_on(&online, LIMIT).as_deref(), Some("false"));
    assert_eq!(w.next_on(&online, LIMIT).as_deref(), Some("true"));
    let r = request(admin, "POST", "/devices/0/mqtt?action=explode", None);
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("drop, pause or resume")
    );
}

fn tasmota(broker: &Broker, topic: &str, outputs: usize) -> DeviceSpec {
    let mut spec = MqttSpec::new(&broker.address());
    spec.topic = Some(topic.into());
    let mut d = with_mqtt("Tasmota", spec);
    d.outputs = Some(outputs);
    d
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn tasmota_runs_commands_from_cmnd_and_answers_on_stat() {
    let b = Broker::start();
    let emu = start(vec![tasmota(&b, "plug", 1), tasmota(&b, "strip", 2)]);
    let lwt = b.watch("tele/+/LWT");
    let mut seen: Vec<String> = (0..2).filter_map(|_| lwt.next(LIMIT)).collect();
    seen.sort();
    assert_eq!(seen, ["tele/plug/LWT Online", "tele/strip/LWT Online"]);

    // One relay says POWER, as the firmware does without SetOption26.
    let stat = b.watch("stat/plug/#");
    b.publish("cmnd/plug/POWER", "ON", false);
    assert_eq!(
        stat.next(LIMIT).as_deref(),
        Some(r#"stat/plug/RESULT {"POWER":"ON"}"#)
    );
    assert_eq!(stat.next(LIMIT).as_deref(), Some("stat/plug/POWER ON"));
    assert!(emu.output(0, 0));
    // Switched another way (its button, HTTP): the same two messages.
    emu.set_output(0, 0, false);
    assert_eq!(
        stat.next(LIMIT).as_deref(),
        Some(r#"stat/plug/RESULT {"POWER":"OFF"}"#)
    );
    assert_eq!(stat.next(LIMIT).as_deref(), Some("stat/plug/POWER OFF"));

    let stat2 = b.watch("stat/strip/#");
    b.publish("cmnd/strip/POWER2", "toggle", false);
    assert_eq!(
        stat2.next(LIMIT).as_deref(),
        Some(r#"stat/strip/RESULT {"POWER2":"ON"}"#)
    );
    assert_eq!(stat2.next(LIMIT).as_deref(), Some("stat/strip/POWER2 ON"));
    assert!(emu.output(1, 1) && !emu.output(1, 0));
    // An empty payload asks.
    b.publish("cmnd/strip/Power2", "", false);
    assert_eq!(
        stat2.next(LIMIT).as_deref(),
        Some(r#"stat/strip/RESULT {"POWER2":"ON"}"#)
    );
    assert_eq!(stat2.next(LIMIT).as_deref(), Some("stat/strip/POWER2 ON"));

    // Status n on STATUS<n>; Status 0 one message per section; Status0 all in one.
    b.publish("cmnd/strip/Status", "5", false);
    let net = stat2.next_on("stat/strip/STATUS5", LIMIT).unwrap();
    assert_eq!(json_of(&net)["StatusNET"]["Mac"], json!(emu.mac(1)));
    b.publish("cmnd/strip/Status", "0", false);
    let mut topics = Vec::new();
    while let Some(line) = stat2.next(LIMIT) {
        let topic = line.split(' ').next().unwrap().to_string();
        topics.push(topic.clone());
        if topic == "stat/strip/STATUS11" {
            break;
        }
    }
    assert_eq!(
        topics.first().map(String::as_str),
        Some("stat/strip/STATUS")
    );
    assert!(
        topics.contains(&"stat/strip/STATUS6".to_string()),
        "{topics:?}"
    );
    b.publish("cmnd/strip/Status0", "", false);
    let all = json_of(&stat2.next_on("stat/strip/STATUS0", LIMIT).unwrap());
    assert_eq!(all["StatusMQT"]["MqttHost"], "127.0.0.1");
    assert_eq!(all["StatusMQT"]["MqttCount"], 1);
    assert_eq!(
        all["Status"]["Topic"],
        json!(emu.device_id(1).replace('-', "_"))
    );
    b.publish("cmnd/strip/Frobnicate", "1", false);
    assert_eq!(
        stat2.next(LIMIT).as_deref(),
        Some(r#"stat/strip/RESULT {"Command":"Unknown"}"#)
    );
    // The group topic reaches every device.
    b.publish("cmnd/tasmotas/POWER1", "ON", false);
    assert!(eventually(LIMIT, || emu.output(0, 0) && emu.output(1, 0)));
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn tasmota_telemetry_follows_tele_period_on_the_emulator_clock() {
    let b = Broker::start();
    // Watched before the device exists: its first telemetry, right after connecting, is seen too.
    let tele = b.watch("tele/meter/+");
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(
        vec![tasmota(&b, "meter", 1)],
        &ModelLibrary::embedded(),
        clock.clone(),
    )
    .unwrap();
    assert_eq!(
        tele.next_on("tele/meter/LWT", LIMIT).as_deref(),
        Some("Online")
    );
    let state = json_of(&tele.next_on("tele/meter/STATE", LIMIT).unwrap());
    assert_eq!(state["UptimeSec"], 0);
    assert_eq!(state["POWER"], "OFF");
    let sensor = json_of(&tele.next_on("tele/meter/SENSOR", LIMIT).unwrap());
    assert!(sensor["ENERGY"]["Power"].is_number(), "{sensor}");

    emu.set_output(0, 0, true);
    emu.set_load(0, 0, 100.0);
    clock.advance(Duration::from_secs(300));
    let state = json_of(&tele.next_on("tele/meter/STATE", LIMIT).unwrap());
    assert_eq!(state["UptimeSec"], 300, "one TelePeriod later, not before");
    assert_eq!(state["POWER"], "ON");
    let sensor = json_of(&tele.next_on("tele/meter/SENSOR", LIMIT).unwrap());
    assert_eq!(sensor["ENERGY"]["Power"], 100);

    // TelePeriod 10: published at once, then every 10 s of the clock.
    b.publish("cmnd/meter/TelePeriod", "10", false);
    let state = json_of(&tele.next_on("tele/meter/STATE", LIMIT).unwrap());
    assert_eq!(state["UptimeSec"], 300);
    clock.advance(Duration::from_secs(10));
    let state = json_of(&tele.next_on("tele/meter/STATE", LIMIT).unwrap());
    assert_eq!(state["UptimeSec"], 310);
    let stat = b.watch("stat/meter/RESULT");
    b.publish("cmnd/meter/TelePeriod", "", false);
    assert_eq!(
        stat.next_on("stat/meter/RESULT", LIMIT).as_deref(),
        Some(r#"{"TelePeriod":10}"#)
    );
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn sdctl_emulate_puts_a_device_on_a_broker() {
    use std::io::{BufRead, BufReader};
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let b = Broker::start();
    let online = b.watch("lab/+/online");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args([
            "emulate",
            &format!("ShellyPlus1PM,mqtt={},topic=lab/relay", b.address()),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let _guard = Kill(child);
    let first = out.lines().next().unwrap().unwrap();
    let id = first.split(' ').nth(1).unwrap().to_string();
    assert_eq!(online.next(LIMIT).as_deref(), Some("lab/relay/online true"));
    let answer = call(&b, "lab/relay", "ctl", 1, "Shelly.GetDeviceInfo", json!({}));
    assert_eq!(answer["src"], json!(id));
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn status_update_republishes_and_component_commands_switch() {
    let b = Broker::start();
    let emu = start(vec![with_mqtt(
        "ShellyPlus2PM",
        MqttSpec::new(&b.address()),
    )]);
    let id = emu.device_id(0).to_string();
    let status = b.watch(&format!("{id}/status/+"));
    b.publish(&format!("{id}/command"), "status_update", false);
    let mut keys = Vec::new();
    while !(keys.contains(&"switch:1".to_string()) && keys.contains(&"sys".to_string())) {
        let line = status.next(LIMIT).expect("a status");
        let (topic, payload) = line.split_once(' ').unwrap();
        let key = topic.rsplit('/').next().unwrap().to_string();
        if key == "switch:1" {
            assert_eq!(json_of(payload)["output"], false);
        }
        keys.push(key);
    }
    assert!(keys.contains(&"mqtt".to_string()), "{keys:?}");

    b.publish(&format!("{id}/command/switch:1"), "on", false);
    assert!(eventually(LIMIT, || emu.output(0, 1)));
    b.publish(&format!("{id}/command/switch:1"), "toggle", false);
    assert!(eventually(LIMIT, || !emu.output(0, 1)));
    let errors = b.watch(&format!("{id}/error/+"));
    b.publish(&format!("{id}/command/switch:0"), "explode", false);
    assert_eq!(
        errors.next(LIMIT).as_deref(),
        Some(format!("{id}/error/switch:0 unknown command explode").as_str())
    );
    b.publish(&format!("{id}/command/switch:0"), "status_update", false);
    // The rest of the first round (wifi, ws) is skipped; its switch:0 was read above.
    let one = status.next_on(&format!("{id}/status/switch:0"), LIMIT);
    assert_eq!(json_of(&one.expect("switch:0 status"))["id"], 0);
}

#[test]
#[cfg_attr(smartdev_no_mosquitto, ignore = "mosquitto is not installed")]
fn a_gen1_device_speaks_the_shellies_topics() {
    let b = Broker::start();
    let all = b.watch("shellies/#");
    let clock = EmuClock::manual();
    let mut spec = MqttSpec::new(&b.address());
    spec.topic = Some("shed".into());
    let emu = Emulator::start_with_clock(
        vec![with_mqtt("Shelly2.5", spec)],
        &ModelLibrary::embedded(),
        clock.clone(),
    )
    .unwrap();
    assert_eq!(
        all.next_on("shellies/shed/online", LIMIT).as_deref(),
        Some("true")
    );
    let announce = json_of(&all.next_on("shellies/announce", LIMIT).unwrap());
    assert_eq!(announce["id"], "shed");
    assert_eq!(announce["mac"], json!(emu.mac(0).replace(':', "")));
    assert_eq!(
        all.next_on("shellies/shed/relay/1", LIMIT).as_deref(),
        Some("off")
    );
    assert_eq!(
        all.next_on("shellies/shed/relay/1/energy", LIMIT)
            .as_deref(),
        Some("0")
    );
    let info = json_of(&all.next_on("shellies/shed/info", LIMIT).unwrap());
    assert_eq!(info["mqtt"]["connected"], true);
    assert!(eventually(LIMIT, || emu.mqtt_connected(0)));

    b.publish("shellies/shed/relay/1/command", "on", false);
    assert_eq!(
        all.next_on("shellies/shed/relay/1", LIMIT).as_deref(),
        Some("on")
    );
    assert!(emu.output(0, 1));
    emu.set_input(0, 0, true);
    assert_eq!(
        all.next_on("shellies/shed/input/0", LIMIT).as_deref(),
        Some("1")
    );

    // Every update_period (30 s) of the emulator clock: everything again, energy in watt-minutes.
    emu.set_load(0, 1, 120.0);
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        all.next_on("shellies/shed/relay/1/power", LIMIT).as_deref(),
        Some("120.00")
    );
    assert_eq!(
        all.next_on("shellies/shed/relay/1/energy", LIMIT)
            .as_deref(),
        Some("60")
    );
    b.publish("shellies/command", "announce", false);
    assert!(all.next_on("shellies/shed/announce", LIMIT).is_some());
}
