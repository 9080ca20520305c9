//! Discovery without multicast: announcements as a resolver would hand them over (name, host, addresses, port,
//! TXT), confirmed over HTTP against emulated devices on 127.0.0.1, and against hostile answers. The real mDNS
//! path (queries and announcements on the wire) is tested only inside network namespaces, never here.

mod common;

use common::hostile::{Behaviour, Hostile, answer};
use smartdev::ModelLibrary;
use smartdev::discovery::{
    Announcement, Configured, Discovered, HTTP_SERVICE, SHELLY_SERVICE, confirm_all,
};
use smartdev::emulator::{DeviceSpec, Emulator};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(2);

fn announcement(service: &str, name: &str, port: u16, txt: &[(&str, &str)]) -> Announcement {
    Announcement {
        service: service.into(),
        instance: format!("{name}.{service}"),
        host: format!("{name}.local."),
        addresses: vec!["127.0.0.1".parse().unwrap()],
        port,
        txt: txt
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.as_bytes().to_vec())))
            .collect(),
    }
}

fn mac_colon(mac12: &str) -> String {
    smartdev::discovery::normalise_mac(mac12).unwrap()
}

fn emulator(specs: Vec<DeviceSpec>) -> Emulator {
    Emulator::start(specs, &ModelLibrary::embedded()).expect("emulator starts")
}

fn mac_of(emu: &Emulator, i: usize) -> String {
    // Emulated ids end with the MAC (Gen1/Gen2+: 12 hex digits after the last '-').
    let id = emu.device_id(i);
    mac_colon(id.rsplit('-').next().unwrap())
}

#[test]
fn every_family_is_confirmed_with_its_identity() {
    let mut locked = DeviceSpec::new("Shelly1PMG3");
    locked.password = Some("secret".into());
    let emu = emulator(vec![
        DeviceSpec::new("ShellyPlus1PM"),
        DeviceSpec::new("Shelly1PM"),
        DeviceSpec::new("Tasmota"),
        locked,
    ]);
    let heard = vec![
        announcement(
            SHELLY_SERVICE,
            "ShellyPlus1PM-A8032AB12345",
            emu.port(0),
            &[("gen", "2"), ("app", "Plus1PM")],
        ),
        // The same device on _http._tcp: reported once.
        announcement(
            HTTP_SERVICE,
            "ShellyPlus1PM-A8032AB12345",
            emu.port(0),
            &[("gen", "2")],
        ),
        announcement(
            HTTP_SERVICE,
            "shelly1pm-F4128C",
            emu.port(1),
            &[("arch", "esp8266")],
        ),
        announcement(
            HTTP_SERVICE,
            "tasmota-1234-5678",
            emu.port(2),
            &[("devicetype", "tasmota")],
        ),
        announcement(
            SHELLY_SERVICE,
            "Shelly1PMG3-AABBCCDDEEFF",
            emu.port(3),
            &[("gen", "3")],
        ),
    ];
    let found = confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded());
    assert_eq!(found.len(), 4, "{found:#?}");
    let at = |port: u16| -> &Discovered { found.iter().find(|d| d.port == port).unwrap() };

    let g2 = at(emu.port(0));
    assert_eq!(g2.model.as_deref(), Some("ShellyPlus1PM"));
    assert_eq!(g2.generation, Some(2));
    assert_eq!(g2.mac_address.as_deref(), Some(mac_of(&emu, 0).as_str()));
    assert_eq!(g2.auth_required, Some(false));
    assert!(g2.firmware.is_some());
    assert_eq!(g2.hostname, "ShellyPlus1PM-A8032AB12345");

    let g1 = at(emu.port(1));
    assert_eq!(g1.model.as_deref(), Some("Shelly1PM"));
    assert_eq!(g1.generation, Some(1));
    assert_eq!(g1.mac_address.as_deref(), Some(mac_of(&emu, 1).as_str()));
    assert_eq!(g1.name, "shelly1pm-F4128C");

    let t = at(emu.port(2));
    assert_eq!(t.model.as_deref(), Some("Tasmota"));
    assert_eq!(t.generation, None);
    assert!(t.mac_address.is_some());
    assert_eq!(t.auth_required, Some(false));

    let g3 = at(emu.port(3));
    assert_eq!(g3.model.as_deref(), Some("Shelly1PMG3"));
    assert_eq!(g3.generation, Some(3));
    assert_eq!(
        g3.auth_required,
        Some(true),
        "/shelly is unprotected and says auth_en"
    );

    // PascalCase JSON, no Configured key from the free function.
    let json = serde_json::to_value(g2).unwrap();
    for key in [
        "MacAddress",
        "Model",
        "Generation",
        "Address",
        "Port",
        "Name",
        "Firmware",
        "AuthRequired",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    assert!(json.get("Configured").is_none());
}

#[test]
fn a_tasmota_with_a_web_password_is_still_confirmed() {
    let mut spec = DeviceSpec::new("Tasmota");
    spec.password = Some("secret".into());
    let emu = emulator(vec![spec]);
    let heard = [announcement(
        HTTP_SERVICE,
        "tasmota-1234-5678",
        emu.port(0),
        &[("devicetype", "tasmota")],
    )];
    let found = confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].auth_required, Some(true));
    assert_eq!(
        found[0].mac_address, None,
        "a refused Status 0 tells no MAC"
    );
}

#[test]
fn the_devices_answer_wins_over_its_announced_generation() {
    let emu = emulator(vec![
        DeviceSpec::new("Shelly1PM"),
        DeviceSpec::new("ShellyPlus1PM"),
    ]);
    let heard = [
        // A Gen1 device claiming gen=2 on the Shelly service.
        announcement(
            SHELLY_SERVICE,
            "ShellyPlus1PM-000000000001",
            emu.port(0),
            &[("gen", "2"), ("app", "Plus1PM")],
        ),
        // A Gen2 device announced like a Gen1.
        announcement(
            HTTP_SERVICE,
            "shelly1pm-000000000002",
            emu.port(1),
            &[("gen", "1")],
        ),
    ];
    let found = confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded());
    assert_eq!(found.len(), 2, "{found:#?}");
    let at = |port: u16| found.iter().find(|d| d.port == port).unwrap();
    assert_eq!(
        (at(emu.port(0)).generation, at(emu.port(0)).model.as_deref()),
        (Some(1), Some("Shelly1PM"))
    );
    assert_eq!(
        (at(emu.port(1)).generation, at(emu.port(1)).model.as_deref()),
        (Some(2), Some("ShellyPlus1PM"))
    );
}

#[test]
fn garbage_answers_and_silent_addresses_confirm_nothing() {
    let emu = emulator(vec![DeviceSpec::new("ShellyPlus1PM")]);
    let bodies: Vec<Vec<u8>> = vec![
        b"HTTP/1.1 200 OK\r\n\r\n\x00\xff\xfe not http at all".to_vec(),
        answer(200, b"<html>a router's page</html>"),
        answer(404, b"{\"mac\":\"A8032AB12345\",\"gen\":2,\"model\":\"SNSW-001P16EU\"}"),
        answer(200, b"{\"gen\":2,\"model\":\"SNSW-001P16EU\"}"),
        answer(200, b"{\"mac\":\"not a mac\",\"gen\":2,\"model\":\"SNSW-001P16EU\"}"),
        answer(200, b"{\"mac\":\"A8032AB12345\",\"gen\":\"two\",\"model\":\"SNSW-001P16EU\"}"),
        answer(200, b"{\"mac\":42,\"type\":[]}"),
        answer(200, b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["),
    ];
    for body in bodies {
        let hostile = Hostile::start(emu.port(0));
        hostile.set(Behaviour::Raw(body.clone()));
        let heard = [announcement(
            SHELLY_SERVICE,
            "ShellyPlus1PM-A8032AB12345",
            hostile.port(),
            &[("gen", "2")],
        )];
        let found = confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded());
        assert!(
            found.is_empty(),
            "{:?} → {found:#?}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(hostile.requests(), 1, "one request per candidate");
    }
    // A body far beyond any real /shelly is not read to its end.
    let hostile = Hostile::start(emu.port(0));
    hostile.set(Behaviour::Huge(64 * 1024 * 1024));
    let heard = [announcement(
        SHELLY_SERVICE,
        "ShellyPlus1PM-A8032AB12345",
        hostile.port(),
        &[],
    )];
    assert!(confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded()).is_empty());
    // A device that trickles its answer is given up within the timeout.
    let hostile = Hostile::start(emu.port(0));
    hostile.set(Behaviour::Trickle(
        answer(200, b"{\"mac\":\"A8032AB12345\"}"),
        Duration::from_millis(400),
    ));
    let heard = [announcement(
        SHELLY_SERVICE,
        "ShellyPlus1PM-A8032AB12345",
        hostile.port(),
        &[],
    )];
    let started = Instant::now();
    assert!(
        confirm_all(
            &heard,
            Duration::from_millis(500),
            &ModelLibrary::embedded()
        )
        .is_empty()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by the timeout"
    );
}

#[test]
fn announcements_that_are_not_devices_are_not_asked() {
    let hostile = Hostile::start(1);
    hostile.set(Behaviour::Raw(answer(200, b"{}")));
    let mut printer = announcement(
        HTTP_SERVICE,
        "Office Printer",
        hostile.port(),
        &[("ty", "LaserJet")],
    );
    let mut huge_txt = announcement(SHELLY_SERVICE, "x", hostile.port(), &[]);
    huge_txt.instance = "y".repeat(10_000);
    let no_port = announcement(SHELLY_SERVICE, "ShellyPlus1-AABBCCDDEEFF", 0, &[]);
    printer.addresses.push("224.0.0.251".parse().unwrap());
    let found = confirm_all(
        &[printer, huge_txt, no_port],
        TIMEOUT,
        &ModelLibrary::embedded(),
    );
    assert!(found.is_empty());
    assert_eq!(hostile.requests(), 0);
}

#[test]
fn configured_serialises_as_false_or_the_name() {
    let d = Discovered {
        mac_address: None,
        model: None,
        reported_model: None,
        generation: None,
        address: "192.168.1.20".parse().unwrap(),
        port: 80,
        name: "x".into(),
        hostname: "x".into(),
        firmware: None,
        auth_required: None,
        cert_sha256: None,
        configured: Some(Configured::No),
    };
    assert_eq!(serde_json::to_value(&d).unwrap()["Configured"], false);
    let named = Discovered {
        configured: Some(Configured::As("Kitchen".into())),
        ..d
    };
    assert_eq!(
        serde_json::to_value(&named).unwrap()["Configured"],
        "Kitchen"
    );
}

/// The emulator's own announcement records (the shapes of §10: Gen2+ on both services with TXT gen/app/ver,
/// Gen1 on `_http._tcp` as `shelly1pm-<MAC>`, Tasmota with `devicetype=tasmota`) lead discovery to each device.
#[test]
fn emulator_announcements_lead_to_their_devices() {
    let emu = emulator(vec![
        DeviceSpec::new("ShellyPlus1PM"),
        DeviceSpec::new("Shelly1PM"),
        DeviceSpec::new("Tasmota"),
        DeviceSpec::new("ShellyPro3EM"),
    ]);
    let g2 = emu.announcement(0);
    let services: Vec<&str> = g2.iter().map(|r| r.service.as_str()).collect();
    assert_eq!(services, [SHELLY_SERVICE, HTTP_SERVICE]);
    let mac12: String = mac_of(&emu, 0).replace(':', "");
    assert_eq!(
        g2[0].instance,
        format!("ShellyPlus1PM-{mac12}.{SHELLY_SERVICE}")
    );
    assert_eq!(g2[0].host, format!("ShellyPlus1PM-{mac12}.local."));
    let txt: Vec<&str> = g2[0].txt.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(txt, ["gen", "app", "ver"]);
    let g1 = emu.announcement(1);
    assert_eq!(g1.len(), 1);
    assert_eq!(g1[0].service, HTTP_SERVICE);
    assert!(
        g1[0].instance.starts_with("shelly1pm-"),
        "{}",
        g1[0].instance
    );
    let t = emu.announcement(2);
    assert_eq!(
        t[0].txt,
        [("devicetype".to_string(), Some(b"tasmota".to_vec()))]
    );

    let heard: Vec<Announcement> = (0..emu.len()).flat_map(|i| emu.announcement(i)).collect();
    let found = confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded());
    let mut models: Vec<&str> = found.iter().filter_map(|d| d.model.as_deref()).collect();
    models.sort();
    assert_eq!(
        models,
        ["Shelly1PM", "ShellyPlus1PM", "ShellyPro3EM", "Tasmota"],
        "{found:#?}"
    );
    assert!(found.iter().all(|d| d.mac_address.is_some()));
}

#[test]
fn announcements_are_switched_per_device_through_the_api_and_the_admin_endpoint() {
    let emu = emulator(vec![
        DeviceSpec::new("ShellyPlus1PM"),
        DeviceSpec::new("Shelly1PM"),
    ]);
    assert!(!emu.announcing(), "off unless asked");
    assert!(emu.announced(0));
    emu.set_announced(0, false).unwrap();
    assert!(!emu.announced(0));
    let admin = emu.admin_port();
    let r = common::raw_http::request(admin, "GET", "/devices/0/announce", None).json();
    assert_eq!(r["announced"], false);
    assert_eq!(r["announcing"], false);
    assert_eq!(r["records"][0]["service"], SHELLY_SERVICE);
    assert_eq!(r["records"][0]["txt"]["gen"], "2");
    let r = common::raw_http::request(admin, "POST", "/devices/0/announce?on=true", None).json();
    assert_eq!(r["announced"], true);
    assert!(emu.announced(0));
    let r = common::raw_http::request(admin, "POST", "/devices/1/announce?on=maybe", None);
    assert!(r.text().contains("on=true or on=false"), "{}", r.text());
}

/// A device that serves HTTPS only (firmware 2.0 with a certificate) is confirmed over HTTPS after its HTTP
/// answer fails, reported with its certificate's fingerprint, and the YAML block discovery prints opens it with
/// that certificate pinned: a device behind a certificate goes from `sdctl discover --yaml` to working.
#[test]
fn an_https_only_device_is_confirmed_with_its_fingerprint_and_its_yaml_block_opens_it() {
    let mut tls = DeviceSpec::new("ShellyPlus1PM");
    tls.tls = true;
    let emu = emulator(vec![tls, DeviceSpec::new("ShellyPlus1PM")]);
    let heard = vec![
        announcement(
            SHELLY_SERVICE,
            "ShellyPlus1PM-AAAAAAAAAAA1",
            emu.port(0),
            &[("gen", "2")],
        ),
        announcement(
            SHELLY_SERVICE,
            "ShellyPlus1PM-AAAAAAAAAAA2",
            emu.port(1),
            &[("gen", "2")],
        ),
    ];
    let found = confirm_all(&heard, TIMEOUT, &ModelLibrary::embedded());
    assert_eq!(found.len(), 2, "{found:#?}");
    let at = |port: u16| -> &Discovered { found.iter().find(|d| d.port == port).unwrap() };
    let secure = at(emu.port(0));
    assert_eq!(secure.cert_sha256, emu.certificate_sha256(0));
    assert!(secure.cert_sha256.is_some());
    assert_eq!(
        secure.mac_address.as_deref(),
        Some(mac_of(&emu, 0).as_str())
    );
    assert_eq!(secure.model.as_deref(), Some("ShellyPlus1PM"));
    assert_eq!(
        at(emu.port(1)).cert_sha256,
        None,
        "a plain device answered over HTTP"
    );
    let json = serde_json::to_value(secure).unwrap();
    assert_eq!(
        json["CertSha256"],
        serde_json::json!(emu.certificate_sha256(0))
    );

    let secure_only: Vec<Discovered> = found
        .iter()
        .filter(|d| d.port == emu.port(0))
        .cloned()
        .collect();
    let yaml = smartdev::discovery::yaml(&secure_only);
    assert!(yaml.contains("Tls: true"), "{yaml}");
    assert!(yaml.contains(&format!("Port: {}", emu.port(0))), "{yaml}");
    // The printed block, as pasted (with the settings a test needs), opens the device over HTTPS.
    let pasted = yaml.replace(
        "SmartDevices:\n",
        "SmartDevices:\n  PingAllowed: false\n  FollowMoves: false\n  Channel: http\n",
    );
    let settings =
        smartdev::Settings::from_yaml_str(&pasted).unwrap_or_else(|e| panic!("{e}\n{pasted}"));
    let ctl = smartdev::Controller::open(settings, None).unwrap();
    let d = &ctl.devices()[0];
    assert!(d.online, "{:?}", d.last_error);
    assert_eq!(serde_json::to_value(d).unwrap()["Transport"], "https");
}
