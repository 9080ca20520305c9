//! The emulator answers as real Shelly firmware does, seen by a third-party client over raw HTTP and a plain
//! WebSocket (issue 29, section 2): each test here checks one difference a real client (aioshelly) found.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use smartdev::ModelLibrary;
use smartdev::emulator::{DeviceSpec, EmuClock, Emulator, FirmwareSpec};
use smartdev::ws::client::{Connection, Timeouts};

mod common;

use common::eventually;
use common::raw_http::{local, request};

const LIMIT: Duration = Duration::from_secs(10);

/// Devices on a manual clock: answers compared with each other do not change between two calls.
fn emulator(models: &[&str]) -> Emulator {
    let specs = models.iter().map(|m| DeviceSpec::new(m)).collect();
    Emulator::start_with_clock(specs, &ModelLibrary::embedded(), EmuClock::manual()).unwrap()
}

/// `POST /rpc` with a whole frame; the response frame.
fn frame(port: u16, method: &str, params: Value) -> Value {
    let body = json!({"id": 7, "src": "fidelity", "method": method, "params": params}).to_string();
    let r = request(port, "POST", "/rpc", Some(&body));
    assert_eq!(r.status, 200, "{method}: {}", r.text());
    r.json()
}

/// The result of a call that must succeed.
fn call(port: u16, method: &str, params: Value) -> Value {
    let f = frame(port, method, params.clone());
    assert!(f.get("error").is_none(), "{method} {params}: {f}");
    f["result"].clone()
}

/// The error (code, message) of a call that must fail.
fn fails(port: u16, method: &str, params: Value) -> (i64, String) {
    let f = frame(port, method, params.clone());
    let e = &f["error"];
    assert!(e.is_object(), "{method} {params} should fail: {f}");
    (
        e["code"].as_i64().unwrap(),
        e["message"].as_str().unwrap().to_string(),
    )
}

fn ws(port: u16) -> Connection {
    Connection::connect(local(port), "127.0.0.1", "/rpc", Timeouts::default()).unwrap()
}

/// The next text frame that parses as JSON and `pick` accepts, within the hang guard.
fn next(c: &mut Connection, mut pick: impl FnMut(&Value) -> bool) -> Value {
    let end = Instant::now() + LIMIT;
    loop {
        let text = c
            .recv(end)
            .unwrap()
            .unwrap_or_else(|| panic!("nothing within {LIMIT:?}"));
        let v: Value = serde_json::from_str(&text).unwrap();
        if pick(&v) {
            return v;
        }
    }
}

#[test]
fn dynamic_only_lists_only_dynamic_components_and_pages_follow_total() {
    // Before: `dynamic_only` was ignored and every static component came back, which a client then took for
    // virtual components; and one page held everything, so `total` never made a client page on.
    let emu = emulator(&["ShellyPro4PM"]);
    let p = emu.port(0);
    let dynamic = call(p, "Shelly.GetComponents", json!({"dynamic_only": true}));
    assert_eq!(dynamic["components"], json!([]), "{dynamic}");
    assert_eq!(
        (dynamic["total"].clone(), dynamic["offset"].clone()),
        (json!(0), json!(0))
    );
    assert!(dynamic["cfg_rev"].is_u64());

    // Scripts are components too (script:N): ten of them make more than one page.
    for i in 0..10 {
        call(p, "Script.Create", json!({"name": format!("s{i}")}));
    }
    let status = call(p, "Shelly.GetStatus", json!({}));
    let config = call(p, "Shelly.GetConfig", json!({}));
    let mut want: Vec<String> = status
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| config.get(k.as_str()).is_some())
        .cloned()
        .collect();
    want.sort();
    let mut got = Vec::new();
    let mut pages = 0;
    loop {
        let page = call(p, "Shelly.GetComponents", json!({"offset": got.len()}));
        assert_eq!(page["offset"], json!(got.len()));
        assert_eq!(page["total"], json!(want.len()), "{page}");
        let comps = page["components"].as_array().unwrap();
        assert!(!comps.is_empty(), "an empty page before total: {page}");
        for c in comps {
            let k = c["key"].as_str().unwrap();
            assert_eq!(c["status"], status[k], "{k}");
            assert_eq!(c["config"], config[k], "{k}");
            got.push(k.to_string());
        }
        pages += 1;
        if got.len() >= want.len() {
            break;
        }
    }
    assert!(pages > 1, "{} components fit one page", want.len());
    got.sort();
    assert_eq!(got, want);

    // `include` picks the parts, `keys` the components.
    let only = call(
        p,
        "Shelly.GetComponents",
        json!({"include": ["config"], "keys": ["switch:1", "sys"]}),
    );
    assert_eq!(only["total"], json!(2), "{only}");
    for c in only["components"].as_array().unwrap() {
        assert!(c.get("status").is_none() && c["config"].is_object(), "{c}");
    }
    assert_eq!(
        fails(p, "Shelly.GetComponents", json!({"dynamic_only": "yes"})).0,
        -103
    );
}

#[test]
fn unknown_methods_answer_no_handler_with_code_404_on_every_channel() {
    // Before: -114 "Method X failed: Method not found!", which no Shelly firmware of these models sends;
    // clients (aioshelly) test for 404 to tell a missing method from a failed one.
    let emu = emulator(&["ShellyPlus1PM"]);
    let p = emu.port(0);
    for method in ["Foo.Bar", "Switch.Fly", "AddOn.GetInfo"] {
        let want = json!({"code": 404, "message": format!("No handler for {method}")});
        // HTTP GET /rpc/X: the bare error with status 404.
        let r = request(p, "GET", &format!("/rpc/{method}"), None);
        assert_eq!((r.status, r.json()), (404, want.clone()), "GET {method}");
        // POST /rpc: a response frame (status 200) with the error.
        let f = frame(p, method, json!({}));
        assert_eq!(f["error"], want, "POST {method}");
        assert_eq!(
            (f["id"].clone(), f["dst"].clone()),
            (json!(7), json!("fidelity"))
        );
        // WebSocket.
        let mut c = ws(p);
        c.send_text(&json!({"id": 3, "src": "fidelity", "method": method}).to_string())
            .unwrap();
        let answer = next(&mut c, |v| v["id"] == json!(3));
        assert_eq!(answer["error"], want, "WS {method}");
    }
}

#[test]
fn every_emulator_socket_sets_nodelay_and_pipelined_requests_are_all_answered() {
    // Before: the accepted sockets kept Nagle's algorithm on, so a client pipelining requests over one
    // WebSocket waited for a delayed ACK (about 40 ms) per answer. The option itself is checked, not timing.
    let emu = emulator(&["ShellyPlus2PM"]);
    let p = emu.port(0);
    let mut c = ws(p);
    let methods = [
        "Shelly.GetDeviceInfo",
        "Shelly.GetStatus",
        "Shelly.GetConfig",
        "Switch.GetStatus",
        "Sys.GetConfig",
    ];
    for (id, m) in methods.iter().enumerate() {
        c.send_text(
            &json!({"id": id, "src": "pipe", "method": m, "params": {"id": 0}}).to_string(),
        )
        .unwrap();
    }
    let mut answered = Vec::new();
    while answered.len() < methods.len() {
        let a = next(&mut c, |v| v.get("id").is_some_and(Value::is_u64));
        assert!(a.get("result").is_some(), "{a}");
        answered.push(a["id"].as_u64().unwrap());
    }
    answered.sort();
    assert_eq!(answered, vec![0, 1, 2, 3, 4]);
    assert!(eventually(LIMIT, || emu.ws_connections(0) == 1));
    assert_eq!(emu.ws_nodelay(0), vec![true]);
}

#[test]
fn reboot_drops_connections_refuses_meanwhile_and_restarts_uptime() {
    // Before: Shelly.Reboot was "method not found". Now the device restarts as after an update: connections
    // drop, the port refuses during the restart, and it comes back with its uptime from zero.
    let clock = EmuClock::manual();
    let spec = DeviceSpec {
        firmware: FirmwareSpec {
            restart: Duration::from_secs(3),
            ..FirmwareSpec::default()
        },
        ..DeviceSpec::new("Shelly1PMG3")
    };
    let emu =
        Emulator::start_with_clock(vec![spec], &ModelLibrary::embedded(), clock.clone()).unwrap();
    let p = emu.port(0);
    clock.advance(Duration::from_secs(100));
    assert_eq!(call(p, "Sys.GetStatus", json!({}))["uptime"], json!(100));
    let mut c = ws(p);
    c.send_text(
        &json!({"id": 1, "src": "r", "method": "Shelly.Reboot", "params": {"delay_ms": 1000}})
            .to_string(),
    )
    .unwrap();
    let answer = next(&mut c, |v| v["id"] == json!(1));
    assert_eq!(answer["result"], Value::Null, "{answer}");
    // Until the delay ends it still answers; a second reboot meanwhile is refused.
    assert_eq!(fails(p, "Shelly.Reboot", json!({})).0, -109);
    clock.advance(Duration::from_millis(1000));
    assert!(eventually(LIMIT, || TcpStream::connect(local(p)).is_err()));
    assert!(
        eventually(LIMIT, || c
            .recv(Instant::now() + Duration::from_millis(100))
            .is_err()),
        "the WebSocket connection survived the reboot"
    );
    assert_eq!(emu.ws_connections(0), 0);
    clock.advance(Duration::from_secs(3));
    assert!(eventually(LIMIT, || TcpStream::connect(local(p)).is_ok()));
    let sys = call(p, "Sys.GetStatus", json!({}));
    assert_eq!(sys["uptime"], json!(0), "{sys}");
    assert_eq!(fails(p, "Shelly.Reboot", json!({"delay_ms": -5})).0, -103);
}

#[test]
fn service_configs_and_the_outbound_websocket_config_answer() {
    let emu = emulator(&["ShellyPlus1PM", "Shelly1PMG3"]);
    for d in 0..2 {
        let p = emu.port(d);
        let config = call(p, "Shelly.GetConfig", json!({}));
        let status = call(p, "Shelly.GetStatus", json!({}));
        for (ns, key) in [
            ("Sys", "sys"),
            ("BLE", "ble"),
            ("Cloud", "cloud"),
            ("MQTT", "mqtt"),
            ("WiFi", "wifi"),
        ] {
            assert_eq!(
                call(p, &format!("{ns}.GetConfig"), json!({})),
                config[key],
                "{ns}"
            );
        }
        assert_eq!(call(p, "BLE.GetStatus", json!({})), status["ble"]);
        let methods = call(p, "Shelly.ListMethods", json!({}))["methods"].clone();
        for m in [
            "Shelly.Reboot",
            "Sys.GetConfig",
            "BLE.GetConfig",
            "KVS.Get",
            "Script.List",
            "Ws.SetConfig",
        ] {
            assert!(
                methods.as_array().unwrap().contains(&json!(m)),
                "{m} not listed"
            );
        }
        // Ws.SetConfig changes what Ws.GetConfig and Shelly.GetConfig say.
        let set = call(
            p,
            "Ws.SetConfig",
            json!({"config": {"enable": true, "server": "ws://127.0.0.1:1/x"}}),
        );
        assert_eq!(set["restart_required"], json!(true));
        let ws = call(p, "Ws.GetConfig", json!({}));
        assert_eq!(
            (ws["enable"].clone(), ws["server"].clone()),
            (json!(true), json!("ws://127.0.0.1:1/x"))
        );
        assert_eq!(call(p, "Shelly.GetConfig", json!({}))["ws"], ws);
    }
    // A Gen3 device has KNX, Matter and BTHome, which a Gen2 Plus lacks.
    assert_eq!(
        fails(emu.port(0), "KNX.GetConfig", json!({})).0,
        404,
        "a Plus device has no KNX"
    );
    assert_eq!(
        call(emu.port(1), "Matter.GetConfig", json!({})),
        json!({"enable": false})
    );
}

#[test]
fn kvs_stores_per_device_with_etags_limits_and_a_revision() {
    let emu = emulator(&["ShellyPlus1PM", "ShellyPlus1PM"]);
    let (p, other) = (emu.port(0), emu.port(1));
    let set = call(p, "KVS.Set", json!({"key": "mode", "value": {"a": [1, 2]}}));
    assert_eq!(set["rev"], json!(1));
    let etag = set["etag"].as_str().unwrap().to_string();
    let got = call(p, "KVS.Get", json!({"key": "mode"}));
    assert_eq!(got, json!({"etag": etag, "value": {"a": [1, 2]}}));
    assert_eq!(call(p, "Sys.GetStatus", json!({}))["kvs_rev"], json!(1));
    // Per device: the other one has nothing.
    assert_eq!(fails(other, "KVS.Get", json!({"key": "mode"})).0, -105);
    // A stale etag is refused; the right one updates.
    assert_eq!(
        fails(
            p,
            "KVS.Set",
            json!({"key": "mode", "value": 1, "etag": "nope"})
        )
        .0,
        -103
    );
    call(
        p,
        "KVS.Set",
        json!({"key": "mode", "value": 2, "etag": etag}),
    );
    call(p, "KVS.Set", json!({"key": "other", "value": "x"}));
    let list = call(p, "KVS.List", json!({"match": "mo*"}));
    assert_eq!(list["keys"].as_object().unwrap().len(), 1, "{list}");
    assert_eq!(list["rev"], json!(3));
    assert_eq!(
        call(p, "KVS.Delete", json!({"key": "other"}))["rev"],
        json!(4)
    );
    assert_eq!(fails(p, "KVS.Delete", json!({"key": "other"})).0, -105);
    // Bounded: key and value length, number of keys.
    assert_eq!(
        fails(p, "KVS.Set", json!({"key": "k".repeat(43), "value": 1})).0,
        -103
    );
    assert_eq!(
        fails(
            p,
            "KVS.Set",
            json!({"key": "big", "value": "v".repeat(300)})
        )
        .0,
        -103
    );
    for i in 1..50 {
        call(p, "KVS.Set", json!({"key": format!("k{i}"), "value": i}));
    }
    assert_eq!(
        fails(p, "KVS.Set", json!({"key": "one-too-many", "value": 0})).0,
        -108
    );
    assert_eq!(
        call(p, "KVS.List", json!({}))["keys"]
            .as_object()
            .unwrap()
            .len(),
        50
    );
}

#[test]
fn scripts_are_stored_and_listed_but_say_they_do_not_run() {
    let emu = emulator(&["ShellyPlus1PM"]);
    let p = emu.port(0);
    assert_eq!(call(p, "Script.List", json!({})), json!({"scripts": []}));
    let id = call(p, "Script.Create", json!({"name": "blink"}))["id"].clone();
    assert_eq!(id, json!(1));
    assert_eq!(
        call(p, "Script.PutCode", json!({"id": 1, "code": "let a = 1;"}))["len"],
        json!(10)
    );
    assert_eq!(
        call(
            p,
            "Script.PutCode",
            json!({"id": 1, "code": "\nprint(a);", "append": true})
        )["len"],
        json!(20)
    );
    assert_eq!(
        call(p, "Script.GetCode", json!({"id": 1})),
        json!({"data": "let a = 1;\nprint(a);", "left": 0})
    );
    assert_eq!(
        call(p, "Script.GetCode", json!({"id": 1, "offset": 4, "len": 5})),
        json!({"data": "a = 1", "left": 11})
    );
    assert_eq!(
        call(p, "Script.List", json!({})),
        json!({"scripts": [{"id": 1, "name": "blink", "enable": false, "running": false}]})
    );
    // Listed as a component, stopped, as real devices list their scripts.
    let status = call(p, "Shelly.GetStatus", json!({}));
    assert_eq!(status["script:1"]["running"], json!(false), "{status}");
    assert_eq!(
        call(p, "Shelly.GetConfig", json!({}))["script:1"]["name"],
        json!("blink")
    );
    // Running is not emulated, and the answers say so.
    let (code, message) = fails(p, "Script.Start", json!({"id": 1}));
    assert_eq!(code, -109);
    assert!(message.contains("does not run"), "{message}");
    let (code, message) = fails(p, "Script.Eval", json!({"id": 1, "code": "a"}));
    assert_eq!(code, -109);
    assert!(message.contains("not running"), "{message}");
    assert_eq!(
        call(p, "Script.Stop", json!({"id": 1})),
        json!({"was_running": false})
    );
    assert_eq!(fails(p, "Script.GetCode", json!({"id": 2})).0, -105);
    // Bounded: ten scripts, each at most 20 KiB.
    assert_eq!(
        fails(
            p,
            "Script.PutCode",
            json!({"id": 1, "code": "x".repeat(21 * 1024)})
        )
        .0,
        -108
    );
    for _ in 1..10 {
        call(p, "Script.Create", json!({}));
    }
    assert_eq!(fails(p, "Script.Create", json!({})).0, -108);
    assert_eq!(call(p, "Script.Delete", json!({"id": 1})), Value::Null);
    assert_eq!(
        call(p, "Script.List", json!({}))["scripts"]
            .as_array()
            .unwrap()
            .len(),
        9
    );
}

#[test]
fn configurations_have_the_entries_real_devices_of_each_generation_have() {
    // Before: Gen3/Gen4 lacked knx, matter and bthome; every instance of a model had the same name.
    let emu = emulator(&[
        "Shelly1PMG3",
        "Shelly1PMG4",
        "ShellyPlus1PM",
        "ShellyPro4PM",
        "ShellyEMG3",
    ]);
    let config = |d: usize| call(emu.port(d), "Shelly.GetConfig", json!({}));
    let status = |d: usize| call(emu.port(d), "Shelly.GetStatus", json!({}));
    for d in [0, 1] {
        let (c, s) = (config(d), status(d));
        assert_eq!(
            c["knx"],
            json!({"enable": false, "ia": "15.15.255", "routing": {"addr": "224.0.23.12:3671"}})
        );
        assert_eq!(c["matter"], json!({"enable": false}));
        assert_eq!(c["bthome"], json!({}));
        assert_eq!(s["knx"], json!({}));
        assert_eq!(
            s["matter"],
            json!({"num_fabrics": 0, "commissionable": false})
        );
        assert_eq!(s["bthome"], json!({"errors": ["bluetooth_disabled"]}));
        assert_eq!(
            request(emu.port(d), "GET", "/shelly", None).json()["matter"],
            json!(false)
        );
    }
    let plus = config(2);
    assert!(
        plus.get("knx").is_none() && plus.get("matter").is_none() && plus.get("bthome").is_none()
    );
    assert!(
        request(emu.port(2), "GET", "/shelly", None)
            .json()
            .get("matter")
            .is_none()
    );
    let pro = config(3);
    assert!(pro.get("bthome").is_some() && pro.get("matter").is_none());
    let em = config(4);
    assert!(
        em.get("bthome").is_some() && em.get("knx").is_none(),
        "{em}"
    );
}

#[test]
fn instances_have_no_shared_name_and_slots_differ_and_flip_on_update() {
    let models = ["ShellyPlus1PM"; 8];
    let emu = emulator(&models);
    let mut slots = Vec::new();
    for d in 0..models.len() {
        let shelly = request(emu.port(d), "GET", "/shelly", None).json();
        assert_eq!(shelly["name"], Value::Null, "{shelly}");
        let cfg = call(emu.port(d), "Sys.GetConfig", json!({}));
        assert_eq!(cfg["device"]["name"], Value::Null);
        slots.push(shelly["slot"].as_u64().unwrap());
    }
    assert!(slots.contains(&0) && slots.contains(&1), "{slots:?}");
    let g1 = emulator(&["Shelly1"]);
    assert_eq!(
        request(g1.port(0), "GET", "/settings", None).json()["name"],
        Value::Null
    );

    // An installed update boots from the other slot.
    let clock = EmuClock::manual();
    let spec = DeviceSpec {
        firmware: FirmwareSpec {
            stable: Some("1.8.0".into()),
            ..FirmwareSpec::default()
        },
        ..DeviceSpec::new("ShellyPlus1PM")
    };
    let emu =
        Emulator::start_with_clock(vec![spec], &ModelLibrary::embedded(), clock.clone()).unwrap();
    let p = emu.port(0);
    let before = request(p, "GET", "/shelly", None).json()["slot"]
        .as_u64()
        .unwrap();
    call(p, "Shelly.Update", json!({"stage": "stable"}));
    let mut after = None;
    assert!(eventually(LIMIT, || {
        clock.advance(Duration::from_millis(500));
        let Ok(r) = common::raw_http::send(
            local(p),
            "GET",
            "/shelly",
            &[],
            None,
            Duration::from_secs(1),
        ) else {
            return false;
        };
        let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
        if v["ver"] == json!("1.8.0") {
            after = v["slot"].as_u64();
            return true;
        }
        false
    }));
    assert_eq!(after, Some(1 - before));
}

#[test]
fn gen1_serves_on_port_80_or_says_how_to_get_it() {
    // Some Gen1 clients talk to port 80 only: `sdctl emulate Shelly1:80` binds it where allowed (root here in
    // CI), and otherwise says what to do. Port 80 may be taken by another program: that too is said clearly.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sdctl"))
        .args(["emulate", "Shelly1:80"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let _guard = Kill(child);
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut first).unwrap();
    if first.is_empty() {
        let mut why = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut why).unwrap();
        let clear = why.contains("127.0.0.1:80")
            && (why.contains("CAP_NET_BIND_SERVICE")
                || why.contains("another program listens there"));
        assert!(clear, "no clear reason: {why}");
        return;
    }
    assert!(first.ends_with("http://127.0.0.1:80\n"), "{first}");
    let shelly = request(80, "GET", "/shelly", None).json();
    assert_eq!(shelly["type"], json!("SHSW-1"), "{shelly}");
}

/// 5683 is one port per address: a loopback address of this test's own, so two test runs on one machine (a CI
/// run beside a developer's loop) do not take each other's.
fn own_loopback() -> std::net::Ipv4Addr {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos().into())
        ^ (NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst) << 20);
    std::net::Ipv4Addr::new(
        127,
        100 + (seed % 100) as u8,
        (seed >> 8) as u8,
        2 + ((seed >> 16) % 250) as u8,
    )
}

/// Another program holding UDP 5683 there (Home Assistant, a controller's CoIoT listener on every address) is
/// named as the reason, not taken for a second emulated device.
#[test]
fn coap_beside_another_program_on_5683_says_so() {
    let address = own_loopback();
    let _other = std::net::UdpSocket::bind((address, 5683)).unwrap();
    let mut spec = DeviceSpec::new("Shelly1");
    spec.coap = true;
    let Err(e) = Emulator::start_listening_on(vec![spec], &ModelLibrary::embedded(), 0, address)
    else {
        panic!("the emulator took {address}:5683 from another program");
    };
    let e = e.to_string();
    assert!(e.contains("another program holds UDP 5683"), "{e}");
    assert!(e.contains("CoIoTPort"), "{e}");
}

/// aioshelly's block device asks a Gen1 device for `cit/s` (and, on older firmware, `cit/d`) over CoAP on UDP
/// 5683 and matches the answer by the address it came from: the emulated device answers there, from its own
/// address, with 2.05 Content, its tag and the JSON; a second device cannot take the same address's 5683.
#[test]
fn a_gen1_device_answers_coap_requests_from_its_own_address() {
    use std::net::UdpSocket;
    let address = own_loopback();
    let mut spec = DeviceSpec::new("Shelly1");
    spec.coap = true;
    let emu =
        Emulator::start_listening_on(vec![spec.clone()], &ModelLibrary::embedded(), 0, address)
            .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(LIMIT)).unwrap();
    // The bytes aioshelly sends: NON GET, Uri-Path cit and s (or d), a payload marker and a zero byte.
    let ask = |path: &[u8]| -> (Vec<u8>, std::net::SocketAddr) {
        let mut req = b"\x50\x01\x00\x0A\xb3cit\x01".to_vec();
        req.extend_from_slice(path);
        req.extend_from_slice(b"\xFF\x00");
        client.send_to(&req, (address, 5683)).unwrap();
        let mut buf = [0u8; 2048];
        let (n, from) = client.recv_from(&mut buf).expect("an answer");
        (buf[..n].to_vec(), from)
    };
    let json_of = |d: &[u8]| -> Value {
        let at = d.iter().rposition(|b| *b == 0xFF).unwrap();
        serde_json::from_slice(&d[at + 1..]).unwrap()
    };
    let (reply, from) = ask(b"s");
    assert_eq!(
        from,
        (address, 5683).into(),
        "answered from the device's own address"
    );
    assert_eq!(reply[1], 69, "2.05 Content");
    let mac = emu.mac(0).replace(':', "");
    let tag = format!("SHSW-1#{mac}#2");
    assert!(
        reply.windows(tag.len()).any(|w| w == tag.as_bytes()),
        "option 3332 carries {tag}"
    );
    let output = |g: &Value| {
        g["G"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v[1] == 1101)
            .unwrap()[2]
            .clone()
    };
    assert_eq!(output(&json_of(&reply)), json!(0));
    emu.set_output(0, 0, true);
    assert_eq!(
        output(&json_of(&ask(b"s").0)),
        json!(1),
        "the status is the device's now"
    );
    let d = json_of(&ask(b"d").0);
    assert!(d["blk"].is_array() && d["sen"].is_array(), "{d}");
    // Not a request it knows (a status, another path): no answer, and it still answers after.
    client
        .send_to(b"\x50\x1e\x00\x01\xb3cit\x01s\xFF{}", (address, 5683))
        .unwrap();
    assert_eq!(output(&json_of(&ask(b"s").0)), json!(1));
    // 5683 is one port per address: a second such device there is refused, saying what to do.
    let Err(e) = Emulator::start_listening_on(vec![spec], &ModelLibrary::embedded(), 0, address)
    else {
        panic!("a second device took {address}:5683");
    };
    assert!(e.to_string().contains("--listen-on"), "{e}");
    drop(emu);
}

#[test]
fn coap_is_refused_for_a_gen2_device() {
    let mut spec = DeviceSpec::new("ShellyPlus1PM");
    spec.coap = true;
    let Err(e) = Emulator::start(vec![spec], &ModelLibrary::embedded()) else {
        panic!("coap accepted for a Gen2+ device");
    };
    assert!(e.to_string().contains("coap is for Shelly Gen1"), "{e}");
}
