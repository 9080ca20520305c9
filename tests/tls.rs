//! HTTPS to devices (issue 26): verified against a CA, a pinned fingerprint, or a certificate pinned at first
//! use; refused when it changed (both fingerprints named, `trust_certificate` accepts the new one), expired,
//! or for another name under CA verification; digest authentication over TLS under the firmware 2.0 rules; the
//! handshake bounded by `ResponseTimeout`; and a device reporting Enhanced Security without serving HTTPS
//! stays on HTTP. Certificates come from the emulator (rcgen) and a throwaway CA made here.

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use common::TempDir;
use common::emu::{open, settings};
use common::raw_http::request;
use smartdev::emulator::{CertAuthority, CertSpec, DeviceSpec, EmuClock, Emulator};
use smartdev::{Controller, Error, Identity, ModelLibrary, Settings, Transport};

const PW: &str = "S3cr3t-Value";

fn tls_spec(model: &str) -> DeviceSpec {
    let mut s = DeviceSpec::new(model);
    s.tls = true;
    s
}

fn start(specs: Vec<DeviceSpec>) -> Emulator {
    Emulator::start(specs, &ModelLibrary::embedded()).unwrap()
}

fn id(n: i64) -> Identity {
    Identity::Id(n)
}

/// A CA written to `dir/ca.pem`; the emulated device 0 serves a certificate it signed for `names`.
fn ca_signed(emu: &Emulator, dir: &TempDir, names: &[&str], expired: bool) -> Arc<CertAuthority> {
    let ca = Arc::new(CertAuthority::new("smartdev test CA"));
    dir.write("ca.pem", ca.pem());
    emu.set_certificate(
        0,
        &CertSpec {
            issuer: Some(ca.clone()),
            names: names.iter().map(|n| n.to_string()).collect(),
            expired,
        },
    )
    .unwrap();
    ca
}

fn certificate_error(e: &Error) -> (String, Option<String>, Option<String>) {
    match e {
        Error::Certificate {
            message,
            presented,
            expected,
            ..
        } => (message.clone(), presented.clone(), expected.clone()),
        other => panic!("expected a certificate error, got {other:?}: {other}"),
    }
}

#[test]
fn a_ca_verified_device_is_read_and_switched_over_https() {
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-ca");
    ca_signed(&emu, &dir, &["127.0.0.1"], false);
    let ctl = open(
        &emu,
        &["Name: D, Model: ShellyPlus1PM, Tls: true"],
        &format!("  CaFile: {}\n", dir.join("ca.pem").display()),
    )
    .unwrap();
    let d = ctl.read_device(id(1)).unwrap();
    assert!(d.online, "{:?}", d.last_error);
    assert_eq!(d.transport, Some(Transport::Https));
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["Transport"], "https");
    ctl.change_output(id(1), true).unwrap();
    assert!(emu.output(0, 0));
    ctl.toggle_output(id(1)).unwrap();
    assert!(!emu.output(0, 0));
}

#[test]
fn a_pinned_certificate_is_accepted_and_any_other_refused_naming_both() {
    let emu = start(vec![tls_spec("Shelly1PMG3")]);
    let pin = emu.certificate_sha256(0).unwrap();
    let ctl = open(
        &emu,
        // Lower case without colons: any common spelling is read.
        &[&format!(
            "Name: D, Model: Shelly1PMG3, Tls: true, CertSha256: '{}'",
            pin.replace(':', "").to_lowercase()
        )],
        // HTTPS requests only: a live WSS connection, verified when it was made, would serve the reads.
        "  Channel: http\n",
    )
    .unwrap();
    assert!(ctl.read_device(id(1)).unwrap().online);
    let new = emu.set_certificate(0, &CertSpec::default()).unwrap();
    let e = ctl.read_device(id(1)).unwrap_err();
    let (message, presented, expected) = certificate_error(&e);
    assert_eq!(presented.as_deref(), Some(new.as_str()));
    assert_eq!(expected.as_deref(), Some(pin.as_str()));
    assert!(
        message.contains(&new) && message.contains(&pin),
        "{message}"
    );
    assert!(message.contains("CertSha256"), "{message}");
    assert!(!ctl.is_device_online(id(1)).unwrap());
    assert!(matches!(
        ctl.change_output(id(1), true),
        Err(Error::Certificate { .. })
    ));
    assert!(
        !emu.output(0, 0),
        "nothing was switched on a refused device"
    );
}

#[test]
fn the_first_certificate_is_pinned_in_the_trust_file_and_a_new_one_needs_trust() {
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-tofu");
    let cfg = dir.write(
        "devices.yaml",
        &format!(
            "SmartDevices:\n  Channel: http\n  ResponseTimeout: 2\n  RetryCount: 0\n  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 'https://127.0.0.1', Port: {}}}\n",
            emu.port(0)
        ),
    );
    let settings = Settings::from_file(&cfg).unwrap();
    let trust = dir.join("devices.yaml.trust.json");
    assert_eq!(settings.trust_file.as_deref(), Some(trust.as_path()));
    let first = emu.certificate_sha256(0).unwrap();
    let ctl = Controller::open(settings.clone(), None).unwrap();
    let d = ctl.read_device(id(1)).unwrap();
    assert!(d.online, "{:?}", d.last_error);
    assert_eq!(d.transport, Some(Transport::Https));
    let pins = common::read_json(&trust);
    assert_eq!(pins["Kitchen"], first.as_str());
    // No temporary file is left behind by the atomic write.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

    let second = emu.set_certificate(0, &CertSpec::default()).unwrap();
    let e = ctl.read_device(id(1)).unwrap_err();
    let (message, presented, expected) = certificate_error(&e);
    assert_eq!(presented.as_deref(), Some(second.as_str()));
    assert_eq!(expected.as_deref(), Some(first.as_str()));
    assert!(
        message.contains("sdctl trust") && message.contains("Kitchen"),
        "{message}"
    );
    assert_eq!(
        common::read_json(&trust)["Kitchen"],
        first.as_str(),
        "a refused certificate is never pinned"
    );

    // Accepting only an expected fingerprint refuses another.
    let wrong = smartdev::trust_certificate(&settings, "Kitchen", Some(&first)).unwrap_err();
    assert!(matches!(wrong, Error::Certificate { .. }), "{wrong}");
    let change = smartdev::trust_certificate(&settings, "Kitchen", Some(&second)).unwrap();
    assert_eq!(change.previous.as_deref(), Some(first.as_str()));
    assert_eq!(change.accepted, second);
    assert_eq!(common::read_json(&trust)["Kitchen"], second.as_str());
    // The running controller reads the trust file again before it refuses.
    assert!(ctl.read_device(id(1)).unwrap().online);
}

#[test]
fn an_expired_certificate_is_refused_under_ca_verification() {
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-expired");
    ca_signed(&emu, &dir, &["127.0.0.1"], true);
    let ctl = open(
        &emu,
        &[&format!(
            "Name: D, Model: ShellyPlus1PM, Tls: true, CaFile: '{}'",
            dir.join("ca.pem").display()
        )],
        "",
    )
    .unwrap();
    let e = ctl.read_device(id(1)).unwrap_err();
    let (message, presented, _) = certificate_error(&e);
    assert!(message.contains("expired"), "{message}");
    assert_eq!(presented, emu.certificate_sha256(0));
}

/// Under CA verification the certificate must name the address the device is configured with (an IP address
/// needs an IP SAN); a pin checks the certificate itself, whatever names it carries.
#[test]
fn another_name_is_refused_under_ca_verification_but_not_under_a_pin() {
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-name");
    ca_signed(&emu, &dir, &["shelly-kitchen.example", "10.0.0.9"], false);
    let ca = dir.join("ca.pem");
    let ctl = open(
        &emu,
        &[&format!(
            "Name: D, Model: ShellyPlus1PM, Tls: true, CaFile: '{}'",
            ca.display()
        )],
        "",
    )
    .unwrap();
    let (message, ..) = certificate_error(&ctl.read_device(id(1)).unwrap_err());
    assert!(
        message.contains("does not name 127.0.0.1") && message.contains("IP address SAN"),
        "{message}"
    );
    drop(ctl);
    let pin = emu.certificate_sha256(0).unwrap();
    let ctl = open(
        &emu,
        &[&format!(
            "Name: D, Model: ShellyPlus1PM, Tls: true, CertSha256: '{pin}'"
        )],
        "",
    )
    .unwrap();
    assert!(ctl.read_device(id(1)).unwrap().online);
}

#[test]
fn a_self_signed_certificate_is_refused_under_ca_verification() {
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-issuer");
    dir.write("ca.pem", CertAuthority::new("another CA").pem());
    let ctl = open(
        &emu,
        &["Name: D, Model: ShellyPlus1PM, Tls: true"],
        &format!("  CaFile: {}\n", dir.join("ca.pem").display()),
    )
    .unwrap();
    let (message, ..) = certificate_error(&ctl.read_device(id(1)).unwrap_err());
    assert!(message.contains("not signed by a CA in"), "{message}");
}

fn tls_with_password() -> DeviceSpec {
    let mut s = tls_spec("ShellyPlus1PM");
    s.password = Some(PW.into());
    s
}

fn pinned_block(emu: &Emulator) -> String {
    format!(
        "Name: D, Model: ShellyPlus1PM, Password: {PW}, Tls: true, CertSha256: '{}'",
        emu.certificate_sha256(0).unwrap()
    )
}

/// Firmware 2.0: one nonce reused with a rising `nc` (one challenge for many requests).
#[test]
fn digest_over_tls_reuses_the_nonce_with_a_rising_nc() {
    let emu = start(vec![tls_with_password()]);
    // HTTP digest (the push channel's in-frame digest is tested below, over WSS).
    let ctl = open(&emu, &[&pinned_block(&emu)], "  Channel: http\n").unwrap();
    assert!(ctl.read_device(id(1)).unwrap().online);
    for _ in 0..5 {
        ctl.toggle_output(id(1)).unwrap();
    }
    let s = emu.auth_stats(0);
    assert_eq!(s.challenges, 1, "{s:?}");
    assert_eq!(s.rejected, 0, "{s:?}");
    assert!(s.accepted >= 6, "{s:?}");
}

/// Firmware 2.0: an expired nonce is a 401 with `stale=true`, renewed without an error.
#[test]
fn digest_over_tls_renews_a_stale_nonce() {
    let mut s = tls_with_password();
    s.nonce_lifetime = Duration::from_millis(600);
    let clock = EmuClock::manual();
    let emu =
        Emulator::start_with_clock(vec![s], &ModelLibrary::embedded(), clock.clone()).unwrap();
    // HTTP digest (the push channel's in-frame digest is tested below, over WSS).
    let ctl = open(&emu, &[&pinned_block(&emu)], "  Channel: http\n").unwrap();
    ctl.read_device(id(1)).unwrap();
    clock.advance(Duration::from_millis(800));
    ctl.read_device(id(1))
        .expect("a stale nonce is renewed, not reported");
    let st = emu.auth_stats(0);
    assert_eq!(st.stale, 1, "{st:?}");
    assert_eq!(st.rejected, 0, "{st:?}");
}

/// A TLS connection to device port `port` on 127.0.0.1, verified against `ca`, as another client on the
/// network would open it (reads time out after 10 s: a hang guard).
fn tls_client(
    port: u16,
    ca: &CertAuthority,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca.pem().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let conn =
        rustls::ClientConnection::new(Arc::new(config), "127.0.0.1".try_into().unwrap()).unwrap();
    let sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// One raw HTTPS request (verified against `ca`), as another client on the network would send it.
fn raw_https_get(port: u16, ca: &CertAuthority, target: &str) -> String {
    use std::io::{Read, Write};
    let mut tls = tls_client(port, ca);
    write!(
        tls,
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A client that connects to an HTTPS device and says nothing does not hold up the device's other clients:
/// handshakes are read side by side (as plain requests are), so a request made after it is answered while the
/// silent connection is still open. Served one connection after another, the request would have waited for the
/// silent one to be dropped (the 2 s read timeout) and found it closed.
#[test]
fn a_silent_client_does_not_hold_up_an_https_device() {
    use std::io::{ErrorKind, Read};
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-silent");
    let ca = ca_signed(&emu, &dir, &["127.0.0.1"], false);
    let mut silent = std::net::TcpStream::connect(("127.0.0.1", emu.port(0))).unwrap();
    // Half a ClientHello's record header: a handshake begun and never finished.
    std::io::Write::write_all(&mut silent, &[0x16, 0x03]).unwrap();
    let answer = raw_https_get(emu.port(0), &ca, "/shelly");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    silent.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let still_open = matches!(silent.read(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    assert!(
        still_open,
        "the silent connection was dropped before the request was answered"
    );
}

/// A WSS client as another program would write it: rustls over a socket, upgraded on `/rpc` of device 0.
fn raw_wss(
    port: u16,
    ca: &CertAuthority,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use std::io::{Read, Write};
    let mut tls = tls_client(port, ca);
    tls.write_all(
        b"GET /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    // The answer's head, byte by byte: nothing after it may be taken from the frames.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(tls.read(&mut byte).unwrap(), 1, "closed before the upgrade");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    tls
}

/// The next WebSocket frame's payload from the server.
fn next_frame(tls: &mut impl std::io::Read, buf: &mut Vec<u8>) -> Vec<u8> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if let Some((f, used)) = smartdev::ws::frame::decode(buf, false, 1 << 21).unwrap() {
            buf.drain(..used);
            return f.payload;
        }
        let n = tls.read(&mut chunk).unwrap();
        assert!(n > 0, "closed mid-frame");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Over WSS the emulator serves its connections without blocking: a request split over two TLS records is
/// read whole, and frames larger than rustls takes at once (64 KiB of plain text) arrive whole and in order.
#[test]
fn wss_frames_larger_than_a_tls_buffer_arrive_whole() {
    use smartdev::ws::frame::{self, Opcode};
    use std::io::Write;
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("wss-big");
    let ca = ca_signed(&emu, &dir, &["127.0.0.1"], false);
    let mut tls = raw_wss(emu.port(0), &ca);
    let call = serde_json::json!({"id": 1, "src": "big", "method": "Shelly.GetStatus"}).to_string();
    let wire = frame::encode(Opcode::Text, true, call.as_bytes(), Some([9, 8, 7, 6]));
    let (first, rest) = wire.split_at(wire.len() / 2);
    tls.write_all(first).unwrap();
    tls.flush().unwrap();
    tls.write_all(rest).unwrap();
    tls.flush().unwrap();
    let mut buf = Vec::new();
    let answer: serde_json::Value =
        serde_json::from_slice(&next_frame(&mut tls, &mut buf)).unwrap();
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["switch:0"].is_object(), "{answer}");
    emu.flood_ws(0, Some(200 * 1024));
    let mut last = -1.0;
    for _ in 0..10 {
        let payload = next_frame(&mut tls, &mut buf);
        assert!(payload.len() > 200 * 1024 - 300, "{} bytes", payload.len());
        let n: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(n["method"], "NotifyStatus");
        let power = n["params"]["switch:0"]["apower"].as_f64().unwrap();
        assert!(power > last, "in order: {power} after {last}");
        last = power;
    }
    emu.flood_ws(0, None);
}

/// Firmware 2.0: out of nonce slots, the device answers 429; it is waited out within the retry budget. The
/// emulator's clock stands still while another client takes the slots (TLS handshakes in a debug build are
/// slow), and moves past the throttle window once the controller has been answered 429.
#[test]
fn digest_over_tls_waits_out_429() {
    let clock = EmuClock::manual();
    let emu = Arc::new(
        Emulator::start_with_clock(
            vec![tls_with_password()],
            &ModelLibrary::embedded(),
            clock.clone(),
        )
        .unwrap(),
    );
    let dir = TempDir::new("tls-429");
    let ca = ca_signed(&emu, &dir, &["127.0.0.1"], false);
    // Another client takes every nonce slot: 33 fresh challenges, the last one answered 429.
    let mut last = String::new();
    for _ in 0..33 {
        last = raw_https_get(emu.port(0), &ca, "/rpc/Shelly.GetStatus");
    }
    assert!(last.starts_with("HTTP/1.1 429"), "{last}");
    let throttled = emu.auth_stats(0).throttled;
    let mut st = settings(
        &emu,
        &[&format!(
            "Name: D, Model: ShellyPlus1PM, Password: {PW}, Tls: true"
        )],
        &format!(
            "  CaFile: {}\n  RetryCount: 8\n",
            dir.join("ca.pem").display()
        ),
    );
    st.retry_delay = Duration::from_millis(300);
    let ctl = Controller::open(st, None).unwrap();
    let mover = {
        let emu = emu.clone();
        std::thread::spawn(move || {
            assert!(common::eventually(Duration::from_secs(20), || {
                emu.auth_stats(0).throttled > throttled
            }));
            // The nonces expire and the 2 s window ends.
            clock.advance(Duration::from_secs(3700));
        })
    };
    let d = ctl
        .read_device(id(1))
        .expect("recovered within the retry budget");
    mover.join().unwrap();
    assert!(d.online);
    assert!(
        emu.auth_stats(0).throttled > throttled,
        "{:?}",
        emu.auth_stats(0)
    );
}

/// Before firmware 2.0 every request needs a fresh challenge; that works over TLS too.
#[test]
fn digest_over_tls_with_pre_2_0_firmware() {
    let mut s = tls_with_password();
    s.auth_mode = smartdev::emulator::AuthMode::Fw1;
    let emu = start(vec![s]);
    // HTTP digest (the push channel's in-frame digest is tested below, over WSS).
    let ctl = open(&emu, &[&pinned_block(&emu)], "  Channel: http\n").unwrap();
    for _ in 0..3 {
        ctl.toggle_output(id(1)).unwrap();
    }
    let st = emu.auth_stats(0);
    assert_eq!(st.rejected, 0, "{st:?}");
    assert!(st.challenges >= 3, "{st:?}");
}

/// A device that accepts TCP and never answers the TLS handshake: the request ends as a timeout
/// (`ResponseTimeout` bounds the handshake), not a hang.
#[test]
fn a_silent_tls_handshake_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let mut held = Vec::new();
        while stop_rx.try_recv().is_err() {
            match listener.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    let yaml = format!(
        "SmartDevices:\n  ResponseTimeout: 0.3\n  RetryCount: 0\n  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n    - {{Name: D, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}, Tls: true, CertSha256: '{}'}}\n",
        "AB".repeat(32)
    );
    let ctl = Controller::open(Settings::from_yaml_str(&yaml).unwrap(), None).unwrap();
    let e = ctl.read_device(id(1)).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
    drop(ctl);
    stop_tx.send(()).unwrap();
    holder.join().unwrap();
}

/// Enhanced Security reported, no certificate served: the device stays on HTTP (issue 26: never assume
/// HTTPS from the flag); and a device configured for HTTPS that serves plain HTTP is not quietly spoken to
/// over HTTP.
#[test]
fn enhanced_security_without_a_certificate_stays_http_and_tls_is_never_skipped() {
    let mut s = DeviceSpec::new("ShellyPlus1PM");
    s.enhanced_security = true;
    let emu = start(vec![s.clone(), s]);
    let shelly = request(emu.port(0), "GET", "/shelly", None);
    assert!(shelly.text().contains("\"enhanced_security\":true"));
    let ctl = open(
        &emu,
        &[
            "Name: Plain, Model: ShellyPlus1PM",
            &format!(
                "Name: Secure, Model: ShellyPlus1PM, Tls: true, CertSha256: '{}'",
                "AB".repeat(32)
            ),
        ],
        "",
    )
    .unwrap();
    let d = ctl.read_device(id(1)).unwrap();
    assert!(d.online);
    assert_eq!(d.transport, Some(Transport::Http));
    let e = ctl.read_device(id(2)).unwrap_err();
    assert!(!ctl.is_device_online(id(2)).unwrap(), "{e}");
    assert_eq!(ctl.device(id(2)).unwrap().transport, Some(Transport::Https));
}

#[test]
fn tls_settings_are_checked() {
    let bad = |device: &str| {
        Settings::from_yaml_str(&format!(
            "SmartDevices:\n  Devices:\n    - {{Name: D, Model: ShellyPlus1PM, {device}}}\n"
        ))
        .unwrap_err()
        .to_string()
    };
    let e = bad("Hostname: 'https://10.0.0.5', Tls: false");
    assert!(
        e.contains("Tls is false but Hostname starts with https://"),
        "{e}"
    );
    let e = bad("Hostname: 10.0.0.5, Tls: true, CertSha256: 'AB:CD'");
    assert!(
        e.contains("CertSha256") && e.contains("64 hexadecimal"),
        "{e}"
    );
    let s = Settings::from_yaml_str(
        "SmartDevices:\n  Devices:\n    - {Name: D, Model: ShellyPlus1PM, Hostname: 'https://10.0.0.5'}\n",
    )
    .unwrap();
    assert!(s.devices[0].tls);
    assert_eq!(s.devices[0].hostname.as_deref(), Some("10.0.0.5"));
    // Settings not read from a file have no trust file: a TLS device then needs CaFile or CertSha256.
    let e = Controller::open(s, None).unwrap_err().to_string();
    assert!(
        e.contains("configure CertSha256 or CaFile, or TrustFile"),
        "{e}"
    );
}

#[test]
fn the_default_port_of_a_tls_device_is_443() {
    let s = Settings::from_yaml_str(
        "SmartDevices:\n  RefreshInterval: 0\n  Devices:\n    - {Name: D, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Tls: true, CertSha256: 'AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB:AB', ExpectOffline: true}\n",
    )
    .unwrap();
    let ctl = Controller::open(s, None).unwrap();
    assert_eq!(ctl.device(id(1)).unwrap().port, 443);
}

/// `sdctl check` names a TLS device with nothing to verify it by; `sdctl trust` accepts a device's new
/// certificate in the trust file.
#[test]
fn sdctl_trust_accepts_a_new_certificate() {
    let sdctl = env!("CARGO_BIN_EXE_sdctl");
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let dir = TempDir::new("tls-cli");
    let cfg = dir.write(
        "devices.yaml",
        &format!(
            "SmartDevices:\n  ResponseTimeout: 2\n  Devices:\n    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {}, Tls: true}}\n",
            emu.port(0)
        ),
    );
    let run = |args: &[&str]| {
        std::process::Command::new(sdctl)
            .arg("--config")
            .arg(&cfg)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = emu.certificate_sha256(0).unwrap();
    let out = run(&["--json", "read", "device", "Kitchen"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"Transport\": \"https\""));
    let trust = dir.join("devices.yaml.trust.json");
    assert_eq!(common::read_json(&trust)["Kitchen"], first.as_str());
    let second = emu.set_certificate(0, &CertSpec::default()).unwrap();
    let out = run(&["read", "device", "Kitchen"]);
    assert!(!out.status.success());
    let out = run(&["trust", "Kitchen"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&second) && text.contains(&first), "{text}");
    assert_eq!(common::read_json(&trust)["Kitchen"], second.as_str());
    let out = run(&["read", "device", "Kitchen"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The README's "Secure devices" example is valid, with the CA file it names beside it.
#[test]
fn the_readme_secure_devices_example_is_valid() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .find("### Secure devices")
        .expect("README has the secure devices section");
    let start = section + readme[section..].find("```yaml\n").unwrap() + 8;
    let end = start + readme[start..].find("```").unwrap();
    let dir = TempDir::new("tls-readme");
    dir.write("my-ca.pem", CertAuthority::new("readme CA").pem());
    let cfg = dir.write("devices.yaml", &readme[start..end]);
    let s = Settings::from_file(&cfg).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.devices.len(), 2);
    assert!(s.devices.iter().all(|d| d.tls));
    assert!(s.check().is_empty(), "{:?}", s.check());
}

/// WSS: a TLS device's push channel runs over TLS with the same verification: a switch on the device reaches
/// the snapshot without a read, and requests (with in-frame digest under the firmware 2.0 rules: one
/// challenge, a rising `nc`) go over the socket, not HTTP.
fn push_over_wss(password: Option<&str>) {
    let mut spec = tls_spec("ShellyPlus1PM");
    spec.password = password.map(str::to_string);
    let emu = start(vec![spec]);
    let pin = emu.certificate_sha256(0).unwrap();
    let block = match password {
        Some(p) => {
            format!("Name: D, Model: ShellyPlus1PM, Tls: true, CertSha256: '{pin}', Password: {p}")
        }
        None => format!("Name: D, Model: ShellyPlus1PM, Tls: true, CertSha256: '{pin}'"),
    };
    let ctl = open(&emu, &[&block], "  ResponseTimeout: 2\n").unwrap();
    let limit = Duration::from_secs(20);
    assert!(common::eventually(limit, || emu.ws_subscribed(0) == 1));
    emu.set_output(0, 0, true);
    assert!(
        common::eventually(limit, || ctl.output(id(1)).unwrap().state == Some(true)),
        "the notification came over WSS"
    );
    // Once the socket is lent to the driver, a switch is one frame and no HTTP request.
    let mut on = true;
    on = switched_by_socket_alone(&emu, &ctl, on);
    let challenges = emu.auth_stats(0).challenges;
    for _ in 0..5 {
        on = !on;
        ctl.change_output(id(1), on).unwrap();
    }
    assert_eq!(emu.output(0, 0), on);
    let st = emu.auth_stats(0);
    assert_eq!(st.challenges, challenges, "the nonce is reused: {st:?}");
    assert_eq!(st.rejected, 0, "{st:?}");
    ctl.close();
}

#[test]
fn the_push_channel_runs_over_wss() {
    push_over_wss(None);
}

#[test]
fn the_push_channel_over_wss_authenticates_in_the_frame() {
    push_over_wss(Some(PW));
}

/// WSS refuses a certificate that changed as HTTPS does: the socket never subscribes to it.
#[test]
fn wss_refuses_a_changed_certificate() {
    let emu = start(vec![tls_spec("ShellyPlus1PM")]);
    let pin = emu.certificate_sha256(0).unwrap();
    let ctl = open(
        &emu,
        &[&format!(
            "Name: D, Model: ShellyPlus1PM, Tls: true, CertSha256: '{pin}'"
        )],
        "",
    )
    .unwrap();
    assert!(common::eventually(Duration::from_secs(20), || emu
        .ws_subscribed(0)
        == 1));
    emu.set_certificate(0, &CertSpec::default()).unwrap();
    emu.drop_ws(0);
    let upgrades = emu.ws_upgrades(0);
    // The HTTPS read is refused; the push channel's reconnects are refused before any upgrade.
    assert!(matches!(
        ctl.read_device(id(1)),
        Err(Error::Certificate { .. })
    ));
    assert_eq!(emu.ws_subscribed(0), 0);
    assert_eq!(
        emu.ws_upgrades(0),
        upgrades,
        "no upgrade over a refused certificate"
    );
    ctl.close();
}

/// Switches device 0's output back and forth until a switch goes over its socket (the connection is lent to
/// the driver once subscribed) and lands; the state it was left in.
fn switched_over_the_socket(emu: &Emulator, ctl: &Controller) -> bool {
    let mut on = false;
    assert!(common::eventually(Duration::from_secs(20), || {
        on = !on;
        let before = emu.ws_requests(0);
        ctl.change_output(id(1), on).unwrap();
        emu.ws_requests(0) > before && emu.output(0, 0) == on
    }));
    on
}

/// As [`switched_over_the_socket`] from state `on`, until a switch is socket frames alone (no HTTP request).
fn switched_by_socket_alone(emu: &Emulator, ctl: &Controller, mut on: bool) -> bool {
    assert!(common::eventually(Duration::from_secs(20), || {
        on = !on;
        let before = (emu.total_requests(0), emu.ws_requests(0));
        ctl.change_output(id(1), on).unwrap();
        let after = (emu.total_requests(0), emu.ws_requests(0));
        after.0 - before.0 == after.1 - before.1 && after.1 > before.1
    }));
    on
}

/// Firmware 2.0 over WSS: an expired in-frame nonce is renewed (`stale`), not reported as a wrong password.
#[test]
fn wss_renews_a_stale_in_frame_nonce() {
    let mut s = tls_with_password();
    s.nonce_lifetime = Duration::from_millis(600);
    let clock = EmuClock::manual();
    let emu =
        Emulator::start_with_clock(vec![s], &ModelLibrary::embedded(), clock.clone()).unwrap();
    let ctl = open(&emu, &[&pinned_block(&emu)], "  ResponseTimeout: 2\n").unwrap();
    let limit = Duration::from_secs(20);
    assert!(common::eventually(limit, || emu.ws_subscribed(0) == 1));
    let on = switched_over_the_socket(&emu, &ctl);
    clock.advance(Duration::from_millis(800));
    let before = emu.ws_requests(0);
    ctl.change_output(id(1), !on)
        .expect("a stale nonce is renewed, not reported");
    assert_eq!(emu.output(0, 0), !on);
    assert!(emu.ws_requests(0) > before, "over the socket");
    let st = emu.auth_stats(0);
    assert!(st.stale >= 1, "{st:?}");
    assert_eq!(st.rejected, 0, "{st:?}");
    ctl.close();
}

/// Before firmware 2.0 (a nonce is good once) the in-frame digest over WSS still switches, over the socket.
#[test]
fn wss_with_pre_2_0_firmware_switches_over_the_socket() {
    let mut s = tls_with_password();
    s.auth_mode = smartdev::emulator::AuthMode::Fw1;
    let emu = start(vec![s]);
    let ctl = open(&emu, &[&pinned_block(&emu)], "  ResponseTimeout: 2\n").unwrap();
    let limit = Duration::from_secs(20);
    assert!(common::eventually(limit, || emu.ws_subscribed(0) == 1));
    let mut on = false;
    on = switched_by_socket_alone(&emu, &ctl, on);
    for _ in 0..3 {
        on = !on;
        ctl.change_output(id(1), on).unwrap();
        assert_eq!(emu.output(0, 0), on);
    }
    ctl.close();
}

#[test]
fn tls_keys_are_read_in_layout_a_too() {
    let s = Settings::from_yaml_str(&format!(
        "ShellyDevices:\n  CaFile: ca.pem\n  TrustFile: pins.json\n  Devices:\n    - {{Name: D, Model: ShellyPlus1PM, Hostname: 10.0.0.5, Tls: true, CaFile: mine.pem}}\n    - {{Name: E, Model: ShellyPlus1PM, Hostname: 10.0.0.6, Tls: true, CertSha256: '{}'}}\n",
        "ab".repeat(32)
    ))
    .unwrap();
    assert_eq!(s.ca_file.as_deref(), Some(std::path::Path::new("ca.pem")));
    assert_eq!(
        s.trust_file.as_deref(),
        Some(std::path::Path::new("pins.json"))
    );
    assert_eq!(
        s.devices[0].ca_file.as_deref(),
        Some(std::path::Path::new("mine.pem"))
    );
    let want = ["AB"; 32].join(":");
    assert_eq!(s.devices[1].cert_sha256.as_deref(), Some(want.as_str()));
}

/// The in-frame 429 scenarios, over WSS (`tls`) or plain WS: a firmware 2.0 device with short nonces (the
/// emulator's clock is manual), the controller switching over its socket, then its nonce expired and every
/// slot taken by another client until one is answered 429 (the 2 s throttle window runs).
struct Busy {
    emu: Arc<Emulator>,
    clock: EmuClock,
    ctl: Controller,
    on: bool,
    _dir: TempDir,
}

fn busy_over_the_socket(tls: bool, retry_count: u32, retry_delay: Duration) -> Busy {
    let mut s = tls_with_password();
    s.tls = tls;
    s.nonce_lifetime = Duration::from_millis(600);
    let clock = EmuClock::manual();
    let emu = Arc::new(
        Emulator::start_with_clock(vec![s], &ModelLibrary::embedded(), clock.clone()).unwrap(),
    );
    let dir = TempDir::new("wss-429");
    // Verified by a CA (not pinned) so that the other client can verify it too.
    let (block, root) = if tls {
        let ca = ca_signed(&emu, &dir, &["127.0.0.1"], false);
        let root = format!("  CaFile: {}\n", dir.join("ca.pem").display());
        (
            format!("Name: D, Model: ShellyPlus1PM, Password: {PW}, Tls: true"),
            (Some(ca), root),
        )
    } else {
        (
            format!("Name: D, Model: ShellyPlus1PM, Password: {PW}"),
            (None, String::new()),
        )
    };
    let (ca, root) = root;
    let mut st = settings(&emu, &[&block], &format!("  ResponseTimeout: 2\n{root}"));
    st.retry_count = retry_count;
    st.retry_delay = retry_delay;
    let ctl = Controller::open(st, None).unwrap();
    let limit = Duration::from_secs(20);
    assert!(common::eventually(limit, || emu.ws_subscribed(0) == 1));
    let on = switched_over_the_socket(&emu, &ctl);
    // Our nonce expires; another client then takes every slot: 33 fresh challenges, the last one a 429.
    clock.advance(Duration::from_millis(800));
    let mut last = String::new();
    for _ in 0..33 {
        last = match &ca {
            Some(ca) => raw_https_get(emu.port(0), ca, "/rpc/Shelly.GetStatus"),
            None => format!(
                "HTTP/1.1 {}",
                request(emu.port(0), "GET", "/rpc/Shelly.GetStatus", None).status
            ),
        };
    }
    assert!(last.starts_with("HTTP/1.1 429"), "{last}");
    Busy {
        emu,
        clock,
        ctl,
        on,
        _dir: dir,
    }
}

/// Firmware 2.0 over the WebSocket: a 429 in the frame is waited out under the retry policy and the command
/// is sent again over the socket (the device refused it before running it).
fn waits_out_an_in_frame_429(tls: bool) {
    // Room to wait out the throttle window: the mover ends it after the first in-frame 429.
    let b = busy_over_the_socket(tls, 10, Duration::from_millis(300));
    let (throttled, ws) = (b.emu.auth_stats(0).throttled, b.emu.ws_requests(0));
    let mover = {
        let (emu, clock) = (b.emu.clone(), b.clock.clone());
        std::thread::spawn(move || {
            assert!(common::eventually(Duration::from_secs(20), || {
                emu.auth_stats(0).throttled > throttled
            }));
            // The others' nonces expire and the 2 s window ends.
            clock.advance(Duration::from_secs(3));
        })
    };
    let switched = b.ctl.change_output(id(1), !b.on);
    mover.join().unwrap();
    switched.expect("the 429 is waited out within the retry budget");
    assert_eq!(b.emu.output(0, 0), !b.on);
    let st = b.emu.auth_stats(0);
    assert!(st.throttled > throttled, "{st:?}");
    assert!(b.emu.ws_requests(0) >= ws + 2, "sent again over the socket");
    assert_eq!(st.rejected, 0, "{st:?}");
    b.ctl.close();
}

#[test]
fn wss_waits_out_an_in_frame_429() {
    waits_out_an_in_frame_429(true);
}

/// The same over plain WS (issue 26: each firmware 2.0 rule over TLS and over the in-frame auth).
#[test]
fn ws_waits_out_an_in_frame_429() {
    waits_out_an_in_frame_429(false);
}

/// A 429 in the frame that outlasts the retry budget (the clock never moves) is a device error naming the
/// 429 and the fix, after `RetryCount` + 1 sends over the socket and none over HTTP.
#[test]
fn wss_in_frame_429_past_the_budget_names_the_fix() {
    let b = busy_over_the_socket(true, 2, Duration::from_millis(50));
    let (throttled, ws, all) = (
        b.emu.auth_stats(0).throttled,
        b.emu.ws_requests(0),
        b.emu.total_requests(0),
    );
    let e = b.ctl.change_output(id(1), !b.on).unwrap_err();
    let Error::Device { message, .. } = &e else {
        panic!("expected a device error, got {e:?}: {e}");
    };
    assert!(message.contains("429 Too many requests"), "{message}");
    assert!(message.contains("after 3 attempts"), "{message}");
    assert!(message.contains("RetryCount"), "{message}");
    assert_eq!(b.emu.output(0, 0), b.on, "not switched");
    assert_eq!(b.emu.auth_stats(0).throttled, throttled + 3);
    assert_eq!(b.emu.ws_requests(0), ws + 3);
    assert_eq!(b.emu.total_requests(0), all + 3, "nothing over HTTP");
    b.ctl.close();
}
