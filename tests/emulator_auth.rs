//! Device authentication in the emulator (Gen1 Basic, Gen2+ Digest under both nonce rules, Tasmota
//! parameters), spoken to with raw `TcpStream`s; digests are computed here independently.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use md5::Md5;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use smartdev::ModelLibrary;
use smartdev::emulator::{AuthMode, AuthStats, DeviceSpec, EmuClock, Emulator};

mod common;

use common::raw_http::{Reply, local, request, send};

/// The parsed `WWW-Authenticate: Digest ...` challenge of `r`.
fn challenge(r: &Reply) -> Challenge {
    let h = r
        .header("WWW-Authenticate")
        .unwrap_or_else(|| panic!("no challenge in {} {}", r.status, r.text()));
    Challenge::parse(h)
}

fn get(port: u16, target: &str) -> Reply {
    request(port, "GET", target, None)
}

fn get_with(port: u16, target: &str, authorization: &str) -> Reply {
    authed(port, "GET", target, authorization, None)
}

fn authed(port: u16, method: &str, target: &str, authorization: &str, body: Option<&str>) -> Reply {
    send(
        local(port),
        method,
        target,
        &[("Authorization", authorization)],
        body,
        Duration::from_secs(5),
    )
    .unwrap()
}

fn start(specs: Vec<DeviceSpec>) -> Emulator {
    Emulator::start(specs, &ModelLibrary::embedded()).unwrap()
}

/// Devices on a clock the test moves: nonce lifetimes and throttle windows follow `clock.advance`.
fn start_on_manual_clock(specs: Vec<DeviceSpec>) -> (Emulator, EmuClock) {
    let clock = EmuClock::manual();
    let emu = Emulator::start_with_clock(specs, &ModelLibrary::embedded(), clock.clone()).unwrap();
    (emu, clock)
}

fn with_password(model: &str, password: &str) -> DeviceSpec {
    let mut s = DeviceSpec::new(model);
    s.password = Some(password.to_string());
    s
}

// ---- digest math, written independently of the emulator ----

#[derive(Debug, Clone)]
struct Challenge {
    realm: String,
    nonce: String,
    qop: String,
    algorithm: String,
    stale: bool,
}

impl Challenge {
    /// Splits `Digest k="v", k=v` on commas and each pair on its FIRST `=` (Base64 nonces end in `=`).
    fn parse(header: &str) -> Challenge {
        let rest = header
            .strip_prefix("Digest ")
            .unwrap_or_else(|| panic!("not a digest challenge: {header}"));
        let mut c = Challenge {
            realm: String::new(),
            nonce: String::new(),
            qop: String::new(),
            algorithm: String::new(),
            stale: false,
        };
        for part in rest.split(',') {
            let (k, v) = part.trim().split_once('=').unwrap();
            let v = v.trim_matches('"').to_string();
            match k {
                "realm" => c.realm = v,
                "nonce" => c.nonce = v,
                "qop" => c.qop = v,
                "algorithm" => c.algorithm = v,
                "stale" => c.stale = v == "true",
                other => panic!("unexpected challenge parameter {other} in {header}"),
            }
        }
        c
    }
}

fn h(algorithm: &str, text: &str) -> String {
    let bytes: Vec<u8> = match algorithm {
        "MD5" => Md5::digest(text.as_bytes()).to_vec(),
        _ => Sha256::digest(text.as_bytes()).to_vec(),
    };
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Authorization` value answering `c` for `METHOD uri` with nonce count `nc`.
fn digest(c: &Challenge, password: &str, method: &str, uri: &str, nc: u32) -> String {
    digest_as(c, &c.algorithm, "admin", password, method, uri, nc)
}

fn digest_as(
    c: &Challenge,
    algorithm: &str,
    user: &str,
    password: &str,
    method: &str,
    uri: &str,
    nc: u32,
) -> String {
    let cnonce = format!("c{nc}x{}", c.nonce.len());
    let nc = format!("{nc:08x}");
    let ha1 = h(algorithm, &format!("{user}:{}:{password}", c.realm));
    let ha2 = h(algorithm, &format!("{method}:{uri}"));
    let response = h(
        algorithm,
        &format!("{ha1}:{}:{nc}:{cnonce}:auth:{ha2}", c.nonce),
    );
    format!(
        "Digest username=\"{user}\", realm=\"{}\", nonce=\"{}\", uri=\"{uri}\", cnonce=\"{cnonce}\", \
         nc={nc}, qop=auth, response=\"{response}\", algorithm={algorithm}",
        c.realm, c.nonce
    )
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", BASE64.encode(format!("{user}:{password}")))
}

/// A 401 from a Gen2+ device and its challenge, checked for the fixed parts.
fn expect_challenge(r: &Reply, realm: &str, algorithm: &str) -> Challenge {
    assert_eq!(r.status, 401, "{}", r.text());
    let c = challenge(r);
    assert_eq!(c.qop, "auth");
    assert_eq!(c.realm, realm);
    assert_eq!(c.algorithm, algorithm);
    assert!(!c.nonce.is_empty());
    c
}

fn stats(emu: &Emulator) -> AuthStats {
    emu.auth_stats(0)
}

// ---- Gen1: Basic ----

#[test]
fn gen1_basic_auth() {
    let emu = start(vec![with_password("Shelly1", "pw")]);
    let port = emu.port(0);
    let id = emu.device_id(0).to_string();

    let shelly = get(port, "/shelly");
    assert_eq!(shelly.status, 200, "/shelly stays open");
    assert_eq!(shelly.json()["auth"], true);

    let r = get(port, "/status");
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("WWW-Authenticate"),
        Some(format!("Basic realm=\"{id}\"").as_str())
    );
    assert!(!r.body.is_empty());
    assert_eq!(get(port, "/relay/0?turn=on").status, 401);
    assert!(!emu.output(0, 0), "a refused request does not act");

    let ok = get_with(port, "/relay/0?turn=on", &basic("admin", "pw"));
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.json()["ison"], true);
    let settings = get_with(port, "/settings", &basic("admin", "pw")).json();
    assert_eq!(
        settings["login"],
        json!({"enabled": true, "unprotected": false, "username": "admin"})
    );

    let wrong = get_with(port, "/status", &basic("admin", "nope"));
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("WWW-Authenticate").is_some());
    assert_eq!(get_with(port, "/status", &basic("root", "pw")).status, 401);
    // Digest credentials mean nothing to a Gen1 device.
    assert_eq!(
        get_with(port, "/status", "Digest username=\"admin\"").status,
        401
    );

    let s = stats(&emu);
    assert_eq!(s.accepted, 2);
    assert_eq!(s.rejected, 2);
    assert_eq!(s.challenges, 5, "every 401 carries the Basic challenge");
    assert_eq!((s.stale, s.throttled, s.nonces_in_use), (0, 0, 0));
    // Refused requests are still counted under their endpoint.
    let counts = emu.counts(0);
    assert_eq!(counts["GET /status"], 4);
    assert_eq!(counts["GET /relay/0"], 2);
}

#[test]
fn gen1_custom_user() {
    let mut spec = with_password("Shelly2.5", "secret");
    spec.username = Some("bob".into());
    let emu = start(vec![spec]);
    let port = emu.port(0);
    assert_eq!(
        get_with(port, "/status", &basic("admin", "secret")).status,
        401
    );
    let r = get_with(port, "/settings", &basic("bob", "secret"));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["login"]["username"], "bob");
}

// ---- Gen2+: Digest, firmware 2.x ----

#[test]
fn rpc_open_endpoints_report_auth() {
    let emu = start(vec![with_password("ShellyPlus2PM", "pw")]);
    let port = emu.port(0);
    let id = emu.device_id(0).to_string();
    let shelly = get(port, "/shelly");
    assert_eq!(shelly.status, 200);
    let j = shelly.json();
    assert_eq!(j["auth_en"], true);
    assert_eq!(j["auth_domain"], id.as_str());
    let info = get(port, "/rpc/Shelly.GetDeviceInfo");
    assert_eq!(info.status, 200, "GetDeviceInfo stays open");
    assert_eq!(info.json()["auth_en"], true);
    let frame = json!({"id": 3, "src": "t", "method": "Shelly.GetDeviceInfo"}).to_string();
    let r = request(port, "POST", "/rpc", Some(&frame));
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["auth_domain"], id.as_str());
    assert_eq!(
        stats(&emu),
        AuthStats::default(),
        "open endpoints count nothing"
    );
}

#[test]
fn rpc_digest_fw2_nonce_reuse_and_nc_rules() {
    let emu = start(vec![with_password("ShellyPlus1PM", "pw")]);
    let port = emu.port(0);
    let id = emu.device_id(0).to_string();

    // No credentials: a challenge, and the fixture-shaped error body.
    let r = get(port, "/rpc/Switch.GetStatus?id=0");
    let c = expect_challenge(&r, &id, "SHA-256");
    assert!(!c.stale);
    assert!(c.nonce.ends_with('='), "Base64 with padding: {}", c.nonce);
    assert!(BASE64.decode(&c.nonce).is_ok(), "{}", c.nonce);
    let body = r.json();
    assert_eq!(body["code"], 401);
    let inner: Value = serde_json::from_str(body["message"].as_str().unwrap()).unwrap();
    assert_eq!(inner["auth_type"], "digest");
    assert_eq!(inner["nonce"], c.nonce.as_str());
    assert_eq!(inner["realm"], id.as_str());
    assert_eq!(inner["algorithm"], "SHA-256");

    // One challenge, then five requests on the same nonce with nc 1..5; the uri includes the query.
    for nc in 1..=5u32 {
        let on = nc % 2 == 1;
        let uri = format!("/rpc/Switch.Set?id=0&on={on}");
        let r = get_with(port, &uri, &digest(&c, "pw", "GET", &uri, nc));
        assert_eq!(r.status, 200, "nc {nc}: {}", r.text());
        assert_eq!(emu.output(0, 0), on);
    }
    let s = stats(&emu);
    assert_eq!((s.challenges, s.accepted, s.rejected), (1, 5, 0));
    assert_eq!(s.nonces_in_use, 1);

    // A repeated or lower nc: 401 with a fresh challenge, not stale, not a wrong password.
    let uri = "/rpc/Switch.GetStatus?id=0";
    for nc in [5, 3] {
        let r = get_with(port, uri, &digest(&c, "pw", "GET", uri, nc));
        let fresh = expect_challenge(&r, &id, "SHA-256");
        assert!(!fresh.stale);
        assert_ne!(fresh.nonce, c.nonce);
    }
    // The nonce still works with a higher nc (gaps are fine).
    assert_eq!(
        get_with(port, uri, &digest(&c, "pw", "GET", uri, 9)).status,
        200
    );
    // A new nonce must start at 00000001.
    let c2 = challenge(&get(port, uri));
    assert_eq!(
        get_with(port, uri, &digest(&c2, "pw", "GET", uri, 2)).status,
        401
    );
    assert_eq!(
        get_with(port, uri, &digest(&c2, "pw", "GET", uri, 1)).status,
        200
    );
    let s = stats(&emu);
    assert_eq!((s.accepted, s.rejected, s.stale), (7, 0, 0));
    assert_eq!(s.challenges, 5);

    // A correct digest of a wrong password: rejected, not stale.
    let r = get_with(port, uri, &digest(&c2, "nope", "GET", uri, 2));
    assert!(!expect_challenge(&r, &id, "SHA-256").stale);
    // The uri must be the request target exactly (query included).
    let r = get_with(
        port,
        uri,
        &digest(&c2, "pw", "GET", "/rpc/Switch.GetStatus", 3),
    );
    assert_eq!(r.status, 401);
    // Wrong user.
    let auth = digest_as(&c2, "SHA-256", "root", "pw", "GET", uri, 4);
    assert_eq!(get_with(port, uri, &auth).status, 401);
    // Basic credentials on a Gen2 device (home-assistant/core#143467): 401, only a challenge.
    assert_eq!(get_with(port, uri, &basic("admin", "pw")).status, 401);
    let s = stats(&emu);
    assert_eq!(s.rejected, 3);
    assert_eq!(s.stale, 0);
    assert_eq!(emu.counts(0)["rpc Switch.GetStatus"], 11);
}

#[test]
fn rpc_frames_need_digest_too() {
    let emu = start(vec![with_password("ShellyPlus1PM", "pw")]);
    let port = emu.port(0);
    let id = emu.device_id(0).to_string();
    let frame =
        json!({"id": 11, "src": "tester", "method": "Switch.Set", "params": {"id": 0, "on": true}})
            .to_string();
    let r = request(port, "POST", "/rpc", Some(&frame));
    let c = expect_challenge(&r, &id, "SHA-256");
    let f = r.json();
    assert_eq!(f["id"], 11);
    assert_eq!(f["src"], id.as_str());
    assert_eq!(f["dst"], "tester");
    assert_eq!(f["error"]["code"], 401);
    assert!(!emu.output(0, 0));

    let auth = digest(&c, "pw", "POST", "/rpc", 1);
    let r = authed(port, "POST", "/rpc", &auth, Some(&frame));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"], json!({"was_on": false}));
    assert!(emu.output(0, 0));
    // POST /rpc/<Method> with a params body.
    let auth = digest(&c, "pw", "POST", "/rpc/Switch.Toggle", 2);
    let r = authed(
        port,
        "POST",
        "/rpc/Switch.Toggle",
        &auth,
        Some(r#"{"id":0}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(!emu.output(0, 0));
    assert_eq!(emu.counts(0)["rpc Switch.Set"], 2);
}

#[test]
fn rpc_fw2_expired_nonce_is_stale() {
    let mut spec = with_password("ShellyPlus1PM", "pw");
    spec.nonce_lifetime = Duration::from_secs(1);
    let (emu, clock) = start_on_manual_clock(vec![spec]);
    let port = emu.port(0);
    let id = emu.device_id(0).to_string();
    let uri = "/rpc/Sys.GetStatus";
    let c = challenge(&get(port, uri));
    assert_eq!(
        get_with(port, uri, &digest(&c, "pw", "GET", uri, 1)).status,
        200
    );
    // Still alive a moment before its lifetime ends, gone just after.
    clock.advance(Duration::from_millis(999));
    assert_eq!(stats(&emu).nonces_in_use, 1);
    clock.advance(Duration::from_millis(2));
    assert_eq!(stats(&emu).nonces_in_use, 0);
    let r = get_with(port, uri, &digest(&c, "pw", "GET", uri, 2));
    let fresh = expect_challenge(&r, &id, "SHA-256");
    assert!(fresh.stale, "{:?}", r.header("WWW-Authenticate"));
    assert_ne!(fresh.nonce, c.nonce);
    // A wrong password on an expired nonce is a wrong password, not stale.
    let r = get_with(port, uri, &digest(&c, "nope", "GET", uri, 3));
    assert!(!expect_challenge(&r, &id, "SHA-256").stale);
    // Retrying with the new nonce works.
    assert_eq!(
        get_with(port, uri, &digest(&fresh, "pw", "GET", uri, 1)).status,
        200
    );
    let s = stats(&emu);
    assert_eq!((s.stale, s.rejected, s.accepted), (1, 1, 2));
}

#[test]
fn rpc_fw2_32_slots_then_429_and_throttle_window() {
    let emu = start(vec![with_password("ShellyPlus1PM", "pw")]);
    let port = emu.port(0);
    let uri = "/rpc/Switch.GetStatus?id=0";
    let mut first = None;
    for i in 0..32 {
        let r = get(port, uri);
        assert_eq!(r.status, 401, "challenge {}", i + 1);
        first.get_or_insert_with(|| challenge(&r));
    }
    assert_eq!(stats(&emu).nonces_in_use, 32);
    let r = get(port, uri);
    assert_eq!(r.status, 429, "the 33rd challenge: {}", r.text());
    assert_eq!(
        r.json(),
        json!({"code": 429, "message": "Too many requests"})
    );
    assert!(r.header("WWW-Authenticate").is_none());
    // Inside the throttle window new challenges are refused too, wrong passwords included...
    assert_eq!(get(port, uri).status, 429);
    let c = first.unwrap();
    assert_eq!(
        get_with(port, uri, &digest(&c, "nope", "GET", uri, 1)).status,
        429
    );
    // ...while a client holding a live nonce goes on.
    assert_eq!(
        get_with(port, uri, &digest(&c, "pw", "GET", uri, 1)).status,
        200
    );
    // Frames get a frame error with the same status.
    let frame = json!({"id": 1, "src": "t", "method": "Sys.GetStatus"}).to_string();
    let r = request(port, "POST", "/rpc", Some(&frame));
    assert_eq!(r.status, 429);
    assert_eq!(r.json()["error"]["code"], 429);
    let s = stats(&emu);
    assert_eq!(
        (s.challenges, s.throttled, s.accepted, s.rejected),
        (32, 4, 1, 1)
    );
}

#[test]
fn rpc_fw2_throttle_window_outlasts_freed_slots() {
    let mut spec = with_password("ShellyPlus1PM", "pw");
    spec.nonce_lifetime = Duration::from_secs(1);
    let (emu, clock) = start_on_manual_clock(vec![spec]);
    let port = emu.port(0);
    let uri = "/rpc/Sys.GetStatus";
    for _ in 0..32 {
        assert_eq!(get(port, uri).status, 401);
    }
    assert_eq!(get(port, uri).status, 429);
    // Every slot is free again after 1 s, yet the 2 s window still refuses.
    clock.advance(Duration::from_millis(1300));
    assert_eq!(stats(&emu).nonces_in_use, 0);
    assert_eq!(get(port, uri).status, 429);
    clock.advance(Duration::from_millis(800));
    let r = get(port, uri);
    assert_eq!(r.status, 401, "after the window: {}", r.text());
    assert_eq!(stats(&emu).throttled, 2);
}

// ---- Gen2+: Digest, firmware before 2.0 ----

#[test]
fn rpc_digest_fw1_one_request_per_nonce() {
    let mut spec = with_password("Shelly2PMG3", "pw");
    spec.auth_mode = AuthMode::Fw1;
    let emu = start(vec![spec]);
    let port = emu.port(0);
    let id = emu.device_id(0).to_string();
    let uri = "/rpc/Switch.GetStatus?id=1";
    let r = get(port, uri);
    let c = expect_challenge(&r, &id, "SHA-256");
    assert!(c.nonce.chars().all(|ch| ch.is_ascii_digit()), "{}", c.nonce);
    // The error message holds the nonce as a number, like the fixture.
    let inner: Value = serde_json::from_str(r.json()["message"].as_str().unwrap()).unwrap();
    assert!(inner["nonce"].is_u64(), "{inner}");
    assert_eq!(inner["nc"], 1);

    assert_eq!(
        get_with(port, uri, &digest(&c, "pw", "GET", uri, 1)).status,
        200
    );
    // Reusing it (any nc): 401 with a new challenge, not stale.
    for nc in [2, 1] {
        let r = get_with(port, uri, &digest(&c, "pw", "GET", uri, nc));
        let fresh = expect_challenge(&r, &id, "SHA-256");
        assert!(!fresh.stale);
        assert_ne!(fresh.nonce, c.nonce);
        assert!(fresh.nonce.chars().all(|ch| ch.is_ascii_digit()));
    }
    // No slot limit.
    for _ in 0..40 {
        assert_eq!(get(port, uri).status, 401);
    }
    let s = stats(&emu);
    assert_eq!((s.accepted, s.rejected, s.stale, s.throttled), (1, 0, 0, 0));
    assert_eq!(s.challenges, 43);
    assert_eq!(s.nonces_in_use, 42, "outstanding unused nonces");
}

#[test]
fn rpc_digest_md5_option() {
    let mut spec = with_password("ShellyPlus1PM", "pw");
    spec.digest_md5 = true;
    let emu = start(vec![spec, with_password("ShellyPlus1PM", "pw")]);
    let uri = "/rpc/Sys.GetStatus";
    let (p_md5, p_sha) = (emu.port(0), emu.port(1));
    let c = expect_challenge(&get(p_md5, uri), emu.device_id(0), "MD5");
    assert_eq!(
        get_with(p_md5, uri, &digest(&c, "pw", "GET", uri, 1)).status,
        200
    );
    // A SHA-256 answer to an MD5 challenge is refused.
    let sha = digest_as(&c, "SHA-256", "admin", "pw", "GET", uri, 2);
    assert_eq!(get_with(p_md5, uri, &sha).status, 401);
    assert_eq!(emu.auth_stats(0).rejected, 1);
    // And an MD5 answer to a SHA-256 challenge too.
    let c = expect_challenge(&get(p_sha, uri), emu.device_id(1), "SHA-256");
    let md5 = digest_as(&c, "MD5", "admin", "pw", "GET", uri, 1);
    assert_eq!(get_with(p_sha, uri, &md5).status, 401);
    assert_eq!(emu.auth_stats(1).rejected, 1);
    assert_eq!(
        get_with(p_sha, uri, &digest(&c, "pw", "GET", uri, 1)).status,
        200
    );
}

// ---- Tasmota ----

#[test]
fn tasmota_user_and_password_parameters() {
    let warning = json!({"WARNING": "Need user=<username>&password=<password>"});
    let mut old = with_password("Tasmota", "pw");
    old.tasmota_old_auth = true;
    let mut custom = with_password("Tasmota", "pw");
    custom.username = Some("bob".into());
    let emu = start(vec![with_password("Tasmota", "pw"), old, custom]);
    let (p, p_old, p_bob) = (emu.port(0), emu.port(1), emu.port(2));

    let r = get(p, "/cm?cmnd=Power%20On");
    assert_eq!(r.status, 401);
    assert_eq!(r.json(), warning);
    assert!(!emu.output(0, 0));
    let r = get(p, "/cm?cmnd=Power%20On&user=admin&password=pw");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"POWER": "ON"}));
    assert!(emu.output(0, 0));
    let r = get(p, "/cm?user=admin&password=bad&cmnd=Power%20Off");
    assert_eq!((r.status, r.json()), (401, warning.clone()));
    assert!(emu.output(0, 0));
    let s = emu.auth_stats(0);
    assert_eq!((s.challenges, s.accepted, s.rejected), (2, 1, 1));
    assert_eq!(emu.counts(0)["cm Power On"], 2);

    // Firmware before 8.2.3: the same body with 200.
    let r = get(p_old, "/cm?cmnd=Power%20On");
    assert_eq!((r.status, r.json()), (200, warning.clone()));
    assert!(!emu.output(1, 0));
    assert_eq!(
        get(p_old, "/cm?cmnd=Power%20On&user=admin&password=pw").json(),
        json!({"POWER": "ON"})
    );

    assert_eq!(
        get(p_bob, "/cm?cmnd=State&user=admin&password=pw").status,
        401
    );
    assert_eq!(
        get(p_bob, "/cm?cmnd=State&user=bob&password=pw").status,
        200
    );
}

// ---- runtime control, admin, defaults, spec checks ----

#[test]
fn password_changes_at_runtime() {
    let emu = start(vec![
        DeviceSpec::new("ShellyPlus1PM"),
        DeviceSpec::new("Shelly1"),
        DeviceSpec::new("Tasmota"),
    ]);
    let (rpc, g1, tas) = (emu.port(0), emu.port(1), emu.port(2));
    // Without a password everything is open, as before.
    assert_eq!(get(rpc, "/rpc/Sys.GetStatus").status, 200);
    assert_eq!(get(rpc, "/shelly").json()["auth_en"], false);
    assert!(get(rpc, "/shelly").json()["auth_domain"].is_null());
    assert_eq!(get(g1, "/status").status, 200);
    assert_eq!(get(g1, "/shelly").json()["auth"], false);
    assert_eq!(get(tas, "/cm?cmnd=State").status, 200);

    for i in 0..3 {
        emu.set_password(i, Some("pw"));
    }
    assert_eq!(get(rpc, "/rpc/Sys.GetStatus").status, 401);
    assert_eq!(get(rpc, "/shelly").json()["auth_en"], true);
    assert_eq!(get(g1, "/status").status, 401);
    assert_eq!(get(g1, "/shelly").json()["auth"], true);
    assert_eq!(get(tas, "/cm?cmnd=State").status, 401);
    assert_eq!(emu.auth_stats(0).nonces_in_use, 1);

    for i in 0..3 {
        emu.set_password(i, None);
    }
    assert_eq!(get(rpc, "/rpc/Sys.GetStatus").status, 200);
    assert_eq!(get(g1, "/status").status, 200);
    assert_eq!(get(tas, "/cm?cmnd=State").status, 200);
    let s = emu.auth_stats(0);
    assert_eq!((s.challenges, s.nonces_in_use), (1, 0));
}

#[test]
fn admin_password_and_auth_routes() {
    let emu = start(vec![DeviceSpec::new("ShellyPlus1PM")]);
    let (admin, port) = (emu.admin_port(), emu.port(0));
    let r = request(admin, "POST", "/devices/0/password?value=s3cret", None);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["auth"], true);
    let uri = "/rpc/Sys.GetStatus";
    let c = challenge(&get(port, uri));
    assert_eq!(
        get_with(port, uri, &digest(&c, "s3cret", "GET", uri, 1)).status,
        200
    );
    let a = get(admin, "/devices/0/auth");
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        json!({"enabled": true, "challenges": 1, "accepted": 1, "rejected": 0, "stale": 0,
               "throttled": 0, "nonces_in_use": 1})
    );
    let r = request(admin, "POST", "/devices/0/password", None);
    assert_eq!(r.json()["auth"], false);
    assert_eq!(get(port, uri).status, 200);
    assert_eq!(get(admin, "/devices/0/auth").json()["enabled"], false);
    assert_eq!(get(admin, "/devices/0/password").status, 405);
    assert_eq!(get(admin, "/devices/7/auth").status, 404);
}

#[test]
fn defaults_and_spec_checks() {
    let spec = DeviceSpec::new("ShellyPlus1PM");
    assert_eq!(spec.password, None);
    assert_eq!(spec.username, None);
    assert_eq!(spec.auth_mode, AuthMode::Fw2);
    assert_eq!(spec.nonce_lifetime, Duration::from_secs(3600));
    assert!(!spec.digest_md5 && !spec.tasmota_old_auth);

    let lib = ModelLibrary::embedded();
    let bad = |model: &str, f: fn(&mut DeviceSpec), want: &str| {
        let mut s = DeviceSpec::new(model);
        f(&mut s);
        let e = Emulator::start(vec![s], &lib).err().unwrap();
        assert!(e.to_string().contains(want), "{model}: {e}");
    };
    bad(
        "ShellyPlus1PM",
        |s| s.username = Some("bob".into()),
        "username",
    );
    bad("Shelly1", |s| s.digest_md5 = true, "digest_md5");
    bad("Tasmota", |s| s.auth_mode = AuthMode::Fw1, "auth_mode");
    bad(
        "Shelly1",
        |s| s.nonce_lifetime = Duration::from_secs(5),
        "nonce_lifetime",
    );
    bad(
        "ShellyPlus1PM",
        |s| s.tasmota_old_auth = true,
        "tasmota_old_auth",
    );
    bad(
        "ShellyPlus1PM",
        |s| s.nonce_lifetime = Duration::ZERO,
        "nonce_lifetime",
    );
    bad("Tasmota", |s| s.username = Some("a:b".into()), "username");
    // Naming the Gen2+ user explicitly is fine.
    let mut s = with_password("ShellyPlus1PM", "pw");
    s.username = Some("admin".into());
    assert!(Emulator::start(vec![s], &lib).is_ok());
}
