//! Entry points for fuzzing the parsers that read untrusted input: configuration YAML, webhook requests,
//! device answers (Gen1, RPC, Tasmota) and digest challenges. Each takes arbitrary bytes and must never
//! panic. Used by the cargo-fuzz targets in `tests/fuzz/` (feature `fuzzing`) and by the deterministic
//! property tests below, which run in `cargo test`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::LazyLock;

use serde_json::Value;

use crate::config::ConfigLoader;
use crate::models::SensorQuantity;
use crate::models::{ModelLibrary, ModelRef};
use crate::objects::{Cover, Device, Sensor, TempProbe};
use crate::webhook::request::{Incoming, Rules, parse};

/// Parsed once: the targets run millions of times.
static LIBRARY: LazyLock<ModelLibrary> = LazyLock::new(ModelLibrary::embedded);

/// Built once: a new loader parses the built-in dictionary and the model library, which cost more than most
/// inputs: building it once makes `config_yaml` about 30 times faster under libFuzzer.
static LOADER: LazyLock<ConfigLoader> = LazyLock::new(ConfigLoader::new);

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Loads configuration text and checks its installation rules.
pub fn config_yaml(data: &[u8]) {
    if let Some(t) = text(data)
        && let Ok(settings) = LOADER.load_str(t)
    {
        let _ = settings.check();
    }
}

/// Parses one webhook request: the first line is `METHOD TARGET`, the rest is the body.
pub fn webhook_request(data: &[u8]) {
    let split = data.iter().position(|b| *b == b'\n').unwrap_or(data.len());
    let head = String::from_utf8_lossy(&data[..split]);
    let (method, target) = head.split_once(' ').unwrap_or(("GET", &head));
    let body = data.get(split + 1..).unwrap_or_default();
    let allowed = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
    for (token, allowed) in [(None, None), (Some("s3cret"), Some(&allowed[..]))] {
        let req = Incoming {
            method,
            target,
            body,
            source: IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        let rules = Rules {
            path: "/shelly/webhook",
            token,
            allowed,
        };
        let _ = parse(&req, &rules);
    }
}

/// Feeds bytes to the outbound WebSocket server's frame handling (`webhook/outbound_ws.rs`) as a connecting
/// device's, in two parts (as they may arrive): it must never panic, keep no more than one frame's bytes
/// waiting, and answer only with pongs or a close.
pub fn outbound_ws(data: &[u8]) {
    use crate::driver::ws::frame::MAX_HEADER;
    use crate::webhook::outbound_ws::{Flow, MAX_FRAME, Session};
    struct Sink;
    impl crate::webhook::WsSink for Sink {
        fn identify(&self, frame: &serde_json::Map<String, Value>, _: IpAddr) -> Option<usize> {
            frame
                .get("src")?
                .as_str()?
                .starts_with("shelly")
                .then_some(0)
        }
        fn deliver(&self, _: usize, _: serde_json::Map<String, Value>, _: IpAddr) {}
    }
    let peer = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let now = std::time::Instant::now();
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut session = Session::new(now);
    let (mut input, mut output) = (Vec::new(), Vec::new());
    for part in [&data[..cut], &data[cut..]] {
        input.extend_from_slice(part);
        loop {
            match session.serve(&mut input, &mut output, &Sink, peer, now) {
                Flow::Wait => break,
                Flow::Answer => {
                    // A pong: opcode 0xA, unmasked, at most 125 bytes of payload.
                    assert!(output.first() == Some(&0x8A) && output.len() <= 127);
                    output.clear();
                }
                Flow::Close => {
                    assert_eq!(output.first(), Some(&0x88));
                    return;
                }
            }
        }
        assert!(
            input.len() <= MAX_FRAME + MAX_HEADER,
            "more than a frame kept"
        );
    }
}

/// Decodes bytes as a stream of MQTT packets (`mqtt/packet.rs`) from a broker, within a 4 KiB limit: never a
/// panic, never a packet larger than the limit, and every packet decoded encodes back to bytes that decode to
/// the same packet.
pub fn mqtt_packets(data: &[u8]) {
    use crate::mqtt::packet::{decode, to_bytes};
    let mut at = 0;
    while let Ok(Some((packet, used))) = decode(&data[at..], 4096) {
        assert!(used > 0 && used <= 4096 + 5, "a packet beyond the limit");
        let again = decode(&to_bytes(&packet), usize::MAX)
            .ok()
            .flatten()
            .map(|(p, _)| p);
        assert_eq!(
            again.as_ref(),
            Some(&packet),
            "a packet that does not survive encoding"
        );
        at += used;
    }
}

/// Parses bytes as a CoIoT datagram (`coiot/message.rs`), then its payload's `G` values through a Gen1
/// description: never a panic, nothing accepted beyond the limits, and a status that parsed encodes back to
/// a datagram that parses the same.
pub fn coiot_datagram(data: &[u8]) {
    use crate::coiot::message::{MAX_DATAGRAM, MAX_VALUES, encode_status, parse, status_values};
    let Ok(m) = parse(data) else {
        return;
    };
    assert!(data.len() <= MAX_DATAGRAM, "a datagram beyond the limit");
    if let Ok(values) = status_values(m.payload) {
        assert!(values.len() <= MAX_VALUES, "more values than the limit");
        crate::coiot::description::Description::v2_defaults().read(&values);
    }
    if let (true, Some(tag), false) = (m.is_status(), m.device, m.payload.is_empty()) {
        let text = format!("{}#{}#{}", tag.model, tag.id, tag.revision);
        let again = encode_status(
            m.message_id,
            &text,
            m.validity.unwrap_or(0),
            m.serial.unwrap_or(0),
            m.payload,
        );
        if again.len() <= MAX_DATAGRAM {
            let back = parse(&again).expect("an encoded status parses");
            assert_eq!((back.device, back.payload), (m.device, m.payload));
        }
    }
}

/// Feeds bytes to the webhook listener's request-head parser, whole and cut at every 64th position: a prefix
/// must never contradict the whole (a complete head stays the same head; a refusal never becomes a head).
pub fn webhook_http(data: &[u8]) {
    use crate::webhook::http::parse_head;
    let whole = parse_head(data, crate::webhook::request::MAX_BODY);
    for cut in (0..data.len()).step_by(64) {
        match (
            parse_head(&data[..cut], crate::webhook::request::MAX_BODY),
            &whole,
        ) {
            (Ok(Some(h)), Ok(Some(w))) => assert_eq!(&h, w, "a prefix parsed differently"),
            (Ok(Some(_)), _) => panic!("a prefix parsed, the whole did not"),
            _ => {}
        }
    }
    if let Ok(Some(h)) = whole {
        assert!(h.len <= data.len() && h.len <= crate::webhook::http::MAX_HEAD + 4);
        assert!(h.body_len <= crate::webhook::request::MAX_BODY);
    }
}

/// A device with every kind of component for `model`, so parsers touch every field.
fn device(model: &str, lib: &ModelLibrary) -> (Device, Option<crate::models::ModelInfo>) {
    let info = match lib.resolve(model) {
        Some(ModelRef::Vendor(m)) => Some(m.clone()),
        _ => None,
    };
    let (i, o, m) = info
        .as_ref()
        .map_or((0, 2, 2), |m| (m.inputs, m.outputs, m.meters));
    let d = Device {
        name: "Fuzz".into(),
        temp_probes: vec![
            TempProbe {
                probe_id: Some(100),
                ..TempProbe::default()
            },
            TempProbe {
                probe_id: Some(-1),
                requires_output: Some("O0".into()),
                ..TempProbe::default()
            },
            TempProbe {
                name: "Fuzz".into(),
                ..TempProbe::default()
            },
            TempProbe {
                name: "01131B7A4B6F".into(),
                ..TempProbe::default()
            },
        ],
        ..Device::with_components(i, o, m)
    };
    (d, info)
}

fn json(data: &[u8]) -> Option<Value> {
    serde_json::from_slice(data).ok()
}

/// `d` with two covers and a sensor of every quantity: add-on ones (named like Tasmota sensor blocks) and, when
/// `built_in`, the device's own temperature and humidity first.
fn with_covers_and_sensors(mut d: Device, built_in: bool) -> Device {
    d.covers = (0..2)
        .map(|i| Cover {
            name: format!("C{i}"),
            component_index: i,
            ..Cover::default()
        })
        .collect();
    let sensor = |name: &str, quantity, own: bool, id| Sensor {
        name: name.into(),
        quantity,
        unit: quantity.unit(),
        built_in: own,
        sensor_id: id,
        ..Sensor::default()
    };
    if built_in {
        d.sensors
            .push(sensor("T", SensorQuantity::Temperature, true, Some(0)));
        d.sensors
            .push(sensor("H", SensorQuantity::Humidity, true, Some(0)));
    }
    d.sensors.extend([
        sensor("AM2301", SensorQuantity::Humidity, false, None),
        sensor("BME280", SensorQuantity::Temperature, false, Some(100)),
        sensor("INA219", SensorQuantity::Voltage, false, None),
        sensor("01131B7A4B6F", SensorQuantity::Temperature, false, None),
    ]);
    d
}

/// Applies a Gen1 `/status` answer to devices of every Gen1 meter style, a light, a Shelly 2.5 in both modes
/// (and in roller mode while planned as relays), and a device with its own sensors.
pub fn gen1_status(data: &[u8]) {
    let Some(v) = json(data) else { return };
    let lib = &*LIBRARY;
    for model in [
        "Shelly2.5",
        "Shelly3EM",
        "Shelly1",
        "ShellyEM",
        "ShellyDimmer2",
    ] {
        if let (d, Some(m)) = device(model, lib) {
            let d = with_covers_and_sensors(d, false);
            let shapes = std::iter::once(m.default_shape()).chain(m.shape("roller"));
            for shape in shapes {
                let mut d = d.clone();
                crate::driver::gen1::apply_status(&mut d, &m, &shape, &v, "T");
            }
        }
    }
    // A Gen1 H&T-like device: its own temperature and humidity.
    if let (d, Some(mut m)) = device("Shelly1", lib) {
        m.sensors = vec![SensorQuantity::Temperature, SensorQuantity::Humidity];
        let mut d = with_covers_and_sensors(d, true);
        crate::driver::gen1::apply_status(&mut d, &m, &m.default_shape(), &v, "T");
    }
    if let Some(rollers) = v.get("rollers").and_then(Value::as_array) {
        for r in rollers {
            crate::driver::gen1::apply_roller(&mut Cover::default(), Some(r));
        }
    }
}

/// Reads an RPC answer frame, a `Shelly.GetConfig` result and a `Shelly.GetStatus` result for every RPC
/// meter style.
pub fn rpc_status(data: &[u8]) {
    // The push poller's reader takes the bytes themselves; on any object it must read what the reader of a
    // parsed value reads.
    let typed = std::str::from_utf8(data)
        .ok()
        .and_then(crate::driver::rpc::StatusDoc::parse);
    let Some(v) = json(data) else { return };
    if v.is_object() && crate::untrusted_json::within_depth(data) {
        assert_eq!(typed, Some(crate::driver::rpc::StatusDoc::from_value(&v)));
    }
    let status = crate::driver::rpc::StatusDoc::from_value(&v);
    let _ = crate::driver::rpc::parse_frame(&mut v.clone(), "Shelly.GetStatus");
    let _ = crate::driver::rpc::probe_ids(&v);
    let _ = crate::webhook::install::supported_events(&v);
    let lib = &*LIBRARY;
    for model in [
        "ShellyPlus2PM",
        "ShellyProEM50",
        "ShellyPro3EM",
        "ShellyPlusPMMini",
        "Shelly1G3",
        "ShellyProDimmer1PM",
        "ShellyHTG3",
        "ShellyProDualCoverPM",
    ] {
        if let (d, Some(m)) = device(model, lib) {
            let d = with_covers_and_sensors(d, !m.sensors.is_empty());
            // Every profile the model has (a 2PM as switches and as a cover, a Pro 3EM in both phases).
            let shapes = std::iter::once(m.default_shape())
                .chain(m.profiles.keys().filter_map(|p| m.shape(p)));
            for shape in shapes {
                let mut d = d.clone();
                crate::driver::rpc::apply_status(&mut d, &m, &shape, &status, "T");
            }
        }
    }
    if let Some(cover) = status.channel(crate::driver::rpc::status_doc::Kind::Cover, 0) {
        crate::driver::rpc::apply_cover(&mut Cover::default(), Some(cover));
    }
}

/// Applies a Tasmota `Status 0` answer to a device with outputs, meters, probes, shutters and sensors, and
/// reads every `Shutter<n>` object of it as a command answer would carry it.
pub fn tasmota_status(data: &[u8]) {
    let Some(v) = json(data) else { return };
    let (d, _) = device("Tasmota", &LIBRARY);
    let mut d = with_covers_and_sensors(d, false);
    let _ = crate::driver::tasmota::apply_status(&mut d, &v, "T");
    let _ = crate::driver::tasmota::power_mask(&v);
    for sns in [Some(&v), v.get("StatusSNS")].into_iter().flatten() {
        for n in 1..=2 {
            let shutter = sns.get(format!("Shutter{n}"));
            crate::driver::tasmota::apply_shutter(&mut Cover::default(), shutter);
        }
    }
}

/// Reads energy history as a device sends it: an `EMData`/`EM1Data.GetData` page (3 phases and one channel) and
/// a Gen1 `em_data.csv`, then builds a history of a day from what was read.
pub fn energy_history(data: &[u8]) {
    let mut records = Vec::new();
    if let Some(v) = json(data) {
        for prefixes in [&["a_", "b_", "c_"][..], &[""]] {
            let prefixes: Vec<String> = prefixes.iter().map(|p| p.to_string()).collect();
            let _ = crate::driver::rpc::read_page(&v, &prefixes, &mut records);
        }
    }
    if let Some(t) = text(data)
        && let Ok(rows) = crate::driver::gen1_energy::parse_csv(t)
    {
        records.extend(rows);
    }
    let h = crate::energy::EnergyHistory::assemble(
        "D".into(),
        "M".into(),
        vec!["M".into(); 3],
        (0, 86_400),
        records,
    );
    let _ = (h.total_energy(), h.gaps().count());
}

/// Parses a `WWW-Authenticate` value and answers it.
pub fn digest_challenge(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Some(ch) = crate::driver::digest::parse_challenge(t) {
        let _ = crate::driver::digest::authorization(&ch, "admin", "pw", "POST", "/rpc", 1, "c");
    }
}

/// Settings for [`device_exchange`]: one retry, no pause between attempts (the transport never waits).
static EXCHANGE_SETTINGS: LazyLock<crate::Settings> = LazyLock::new(|| {
    crate::Settings::from_yaml_str(
        "SmartDevices:\n  RetryCount: 1\n  RetryDelay: 0\n  Devices: [{Name: F, Model: Shelly1, Simulate: true}]\n",
    )
    .expect("fixed settings load")
});

/// The drivers [`device_exchange`] runs, chosen by the first byte of its input.
const EXCHANGE_MODELS: &[&str] = &[
    "ShellyPlus2PM",
    "ShellyPro3EM",
    "Shelly2.5",
    "Shelly3EM",
    "Tasmota",
    "ShellyPlus1PM",
];

/// Separates the raw HTTP answers in a [`device_exchange`] input.
pub const ANSWER_SEPARATOR: &[u8] = b"\0\0";

/// Drives whole device answers — status line, headers, body, as raw bytes — through the HTTP client and a
/// driver. The first byte picks the driver (model, password, webhooks); the rest is split at
/// [`ANSWER_SEPARATOR`] into the answers to successive connections (with none left, connections are refused).
/// The driver reads the device, toggles output 0 and reads again, on a thread with a worker's small stack so
/// that deep recursion shows as it would in a worker.
pub fn device_exchange(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut answers = Vec::new();
    let mut rest = rest;
    while let Some(at) = rest
        .windows(ANSWER_SEPARATOR.len())
        .position(|w| w == ANSWER_SEPARATOR)
    {
        answers.push(rest[..at].to_vec());
        rest = &rest[at + ANSWER_SEPARATOR.len()..];
    }
    answers.push(rest.to_vec());
    std::thread::scope(|s| {
        let run = std::thread::Builder::new()
            .stack_size(crate::actor::worker::STACK_SIZE)
            .spawn_scoped(s, || exchange(pick, answers))
            .expect("a thread starts");
        if let Err(panic) = run.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

/// Runs the driver `pick` selects against `answers`.
fn exchange(pick: u8, answers: Vec<Vec<u8>>) {
    let script = crate::driver::canned::Script::default();
    script.load(answers);
    let (mut dev, mut driver) = exchange_driver(pick, &script);
    exercise(&mut dev, &mut *driver);
}

/// The device and driver `pick` selects, talking through `script`.
fn exchange_driver(
    pick: u8,
    script: &crate::driver::canned::Script,
) -> (Device, Box<dyn crate::driver::Driver>) {
    use crate::driver::Credentials;
    let model = EXCHANGE_MODELS[usize::from(pick) % EXCHANGE_MODELS.len()];
    let http = crate::driver::http::Http::canned(&EXCHANGE_SETTINGS, script.clone());
    let base = "http://127.0.0.1:9".to_string();
    let credentials = Credentials {
        username: None,
        password: (pick & 0x40 != 0).then(|| crate::config::Secret::new("pw")),
    };
    let hooks = (pick & 0x80 != 0).then(|| crate::webhook::install::HookPlan {
        base: "http://127.0.0.1:1/shelly/webhook".into(),
        wanted: vec![crate::webhook::install::WantedHook {
            event: "switch.on".into(),
            channel: 0,
            name: format!("{}o0", crate::webhook::install::NAME_PREFIX),
            url: "http://127.0.0.1:1/shelly/webhook?Event=switch.on&DeviceID=1".into(),
        }],
        server: "ws://127.0.0.1:1/shelly/ws".into(),
        outbound: false,
    });
    let (mut dev, info) = device(model, &LIBRARY);
    dev.hostname = Some("127.0.0.1".into());
    dev.port = 9;
    let driver: Box<dyn crate::driver::Driver> = match info {
        Some(m) if m.protocol == crate::models::Protocol::Rest => Box::new(
            crate::driver::gen1::Gen1::new(http, base, m, hooks, credentials),
        ),
        Some(m) => Box::new(crate::driver::rpc::Rpc::new(
            http,
            base,
            m,
            hooks,
            credentials,
            None,
        )),
        None => Box::new(crate::driver::tasmota::Tasmota::new(
            http,
            base,
            credentials,
        )),
    };
    (dev, driver)
}

/// Reads the device and, like the worker, takes `Online` from what the driver saw.
fn read(dev: &mut Device, driver: &mut dyn crate::driver::Driver) -> crate::Result<()> {
    let r = driver.read(dev);
    if let Some(reached) = driver.reach() {
        dev.online = reached;
    }
    r
}

/// Reads the device, syncs its hooks, toggles output 0 and reads again, ignoring errors.
fn exercise(dev: &mut Device, driver: &mut dyn crate::driver::Driver) {
    let _ = read(dev, driver);
    let _ = driver.sync_hooks(dev);
    if !dev.outputs.is_empty() {
        let _ = driver.switch(dev, 0, crate::driver::OutputAction::Toggle);
    }
    let _ = read(dev, driver);
}

/// The event queue's cost at its largest (`examples/bench_queue.rs`): a full queue of `capacity` events from
/// 1,001 devices, then `pushes` events of which 90 % come from one device, each evicting one. Returns the
/// nanoseconds per push and per pull, and how many events were dropped.
pub fn bench_full_queue(capacity: usize, pushes: usize) -> (f64, f64, u64) {
    use crate::event::{EventFilter, WebhookEvent};
    use crate::webhook::queue::EventQueue;
    let of = |id: i64, n: usize| WebhookEvent {
        event: format!("e{n}"),
        device: format!("D{id}"),
        device_id: Some(id),
        ..WebhookEvent::default()
    };
    let q = EventQueue::with_limits(capacity, usize::MAX).without_rate_limit();
    for n in 0..capacity {
        q.push(of(2 + (n % 1000) as i64, n));
    }
    let events: Vec<WebhookEvent> = (0..pushes)
        .map(|n| {
            of(
                if n % 10 == 0 {
                    2 + (n / 10 % 1000) as i64
                } else {
                    1
                },
                n,
            )
        })
        .collect();
    let t = std::time::Instant::now();
    for e in events {
        q.push(e);
    }
    let push = t.elapsed().as_secs_f64() * 1e9 / pushes.max(1) as f64;
    let t = std::time::Instant::now();
    let mut pulled = 0usize;
    while q.pull(&EventFilter::default()).is_some() {
        pulled += 1;
    }
    let pull = t.elapsed().as_secs_f64() * 1e9 / pulled.max(1) as f64;
    (push, pull, q.dropped())
}

#[cfg(test)]
mod tests {
    //! Deterministic property tests: every target gets a few thousand inputs — valid seeds, their random
    //! mutations, and random bytes — and must not panic.

    use super::*;

    /// The floor benchmark's client configuration: against a server that speaks TLS 1.3 too it gets TLS 1.2,
    /// it accepts the pinned certificate and refuses another, and a pin that is no fingerprint is refused
    /// naming it.
    #[cfg(feature = "emulator")]
    #[test]
    fn the_pinned_tls12_configuration_offers_1_2_alone_and_checks_the_pin() {
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
        use std::sync::Arc;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let der = cert.der().clone();
        let pin = crate::driver::tls::fingerprint(&der);
        let server = Arc::new(
            rustls::ServerConfig::builder_with_provider(tls_provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![der],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
                )
                .unwrap(),
        );
        // Both sides in memory, records handed across until neither has more to say.
        let handshake = |pin: &str| {
            let config = pinned_tls12_client_config(pin).unwrap();
            let mut client =
                rustls::ClientConnection::new(config, "127.0.0.1".try_into().unwrap()).unwrap();
            let mut server = rustls::ServerConnection::new(Arc::clone(&server)).unwrap();
            for _ in 0..10 {
                let mut bytes = Vec::new();
                client.write_tls(&mut bytes).unwrap();
                server.read_tls(&mut bytes.as_slice()).unwrap();
                server.process_new_packets().map_err(|e| e.to_string())?;
                bytes.clear();
                server.write_tls(&mut bytes).unwrap();
                client.read_tls(&mut bytes.as_slice()).unwrap();
                client.process_new_packets().map_err(|e| e.to_string())?;
                if !client.is_handshaking() {
                    return Ok(client.protocol_version());
                }
            }
            Err("no end to the handshake".to_string())
        };
        assert_eq!(handshake(&pin), Ok(Some(rustls::ProtocolVersion::TLSv1_2)));
        assert!(handshake(&"AB".repeat(32)).is_err());
        let e = pinned_tls12_client_config("not-a-pin").unwrap_err();
        assert!(e.contains("not-a-pin"), "{e}");
    }

    /// xorshift64*: fixed seed, reproducible everywhere.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    const TOKENS: &[&[u8]] = &[
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b":",
        b",",
        b"null",
        b"true",
        b"-1",
        b"1e308",
        b"\"\\u0000\"",
        b"\n",
        b"  - ",
        b"&",
        b"=",
        b"%",
        b"%zz",
        b"?",
        b"\xff",
        b"Digest ",
        b"nonce=",
        b"\"a=b,c\"",
        b"switch:0",
        b"DeviceID=",
        b"9223372036854775808",
    ];

    fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(v.len() + 1);
            match rng.below(4) {
                0 if !v.is_empty() => {
                    let end = (at + rng.below(16)).min(v.len());
                    v.drain(at.min(v.len())..end);
                }
                1 => {
                    let t = TOKENS[rng.below(TOKENS.len())];
                    v.splice(at..at, t.iter().copied());
                }
                2 if !v.is_empty() => {
                    let i = rng.below(v.len());
                    v[i] = rng.next() as u8;
                }
                _ => {
                    let n = rng.below(8);
                    v.splice(at..at, (0..n).map(|_| rng.next() as u8));
                }
            }
        }
        v
    }

    fn run(seeds: &[&[u8]], target: fn(&[u8])) {
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        for s in seeds {
            target(s);
        }
        for i in 0..3000 {
            let seed = seeds[i % seeds.len()];
            target(&mutate(&mut rng, seed));
        }
        for _ in 0..500 {
            let n = rng.below(256);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            target(&bytes);
        }
    }

    #[test]
    fn outbound_ws_never_panics() {
        use crate::driver::ws::frame::{Opcode, encode};
        let m = Some([1, 2, 3, 4]);
        let full = br#"{"src":"shellyhtg3-aabbccddeeff","method":"NotifyFullStatus","params":{"ts":1,"sys":{"mac":"AABBCCDDEEFF"}}}"#;
        let mut two = encode(Opcode::Text, true, full, m);
        two.extend(encode(Opcode::Ping, true, b"p", m));
        two.extend(encode(Opcode::Close, true, &[3, 232], m));
        let seeds: Vec<Vec<u8>> = vec![
            encode(Opcode::Text, true, full, m),
            two,
            encode(Opcode::Text, false, b"{", m),
            encode(Opcode::Binary, true, &[0; 300], m),
            encode(Opcode::Text, true, b"[1,2]", None),
        ];
        let seeds: Vec<&[u8]> = seeds.iter().map(Vec::as_slice).collect();
        run(&seeds, outbound_ws);
    }

    #[test]
    fn mqtt_packets_never_panic() {
        use crate::mqtt::packet::{Packet, Publish, to_bytes};
        let publish = to_bytes(&Packet::Publish(Publish {
            topic: "shellyplus1pm-a8032ab12345/events/rpc".into(),
            payload: br#"{"method":"NotifyStatus","params":{"switch:0":{"output":true}}}"#.to_vec(),
            qos: 1,
            retain: false,
            dup: false,
            id: Some(3),
        }));
        let mut two = to_bytes(&Packet::ConnAck {
            session_present: false,
            code: 0,
        });
        two.extend_from_slice(&to_bytes(&Packet::SubAck {
            id: 1,
            codes: vec![1, 0],
        }));
        let seeds: Vec<&[u8]> = vec![&publish, &two, &[0xD0, 0x00], &[0x30, 0xFF, 0xFF, 0x7F]];
        run(&seeds, mqtt_packets);
    }

    #[test]
    fn coiot_datagram_never_panics() {
        use crate::coiot::message::encode_status;
        let status = encode_status(
            7,
            "SHSW-25#A4CF12F45678#2",
            0xFFFF,
            0x00FF,
            br#"{"G":[[0,1101,1],[0,4101,12.5],[0,4103,600],[0,3104,999]]}"#,
        );
        let request = [
            0x50, 0x01, 0x00, 0x0a, 0xb3, b'c', b'i', b't', 0x01, b's', 0xff, 0x00,
        ];
        let seeds: Vec<&[u8]> = vec![
            &status,
            &request,
            &[0x40, 30, 0, 0],
            &[0x5E, 30, 0, 0, 0xEE],
        ];
        run(&seeds, coiot_datagram);
    }

    #[test]
    fn config_yaml_never_panics() {
        run(
            &[
                b"SmartDevices:\n  Devices:\n    - {Name: A, Model: Shelly2PMG3, Simulate: true, Outputs: [{}, {}]}\n",
                b"ShellyDevices:\n  WebhookPort: 1\n  Devices: []\nFiles: {ConsoleVerbosity: all}\n",
                b"a: &x [*x]\n",
                // cargo-fuzz crash: a negative or huge number of seconds panicked in Duration::from_secs_f64.
                b"SmartDevices:\n RetryDelay: -12\n",
                b"ShellyDevices: {ResponseTimeout: 1e300, RefreshInterval: -0.5, Devices: []}\n",
            ],
            config_yaml,
        );
    }

    #[test]
    fn webhook_heads_never_panic_and_prefixes_agree() {
        run(
            &[
                b"GET /shelly/webhook?Event=switch.on HTTP/1.1\r\nHost: x\r\n\r\n",
                b"POST /h HTTP/1.1\r\nContent-Length: 12\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n{\"Event\":1}",
                b"POST / HTTP/1.0\nContent-Length: 99999999999999999999999\n\n",
                b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            ],
            webhook_http,
        );
    }

    #[test]
    fn webhook_requests_never_panic() {
        run(
            &[
                b"GET /shelly/webhook?Event=switch.on&DeviceID=1&ObjectType=output&ComponentID=2&token=s3cret\n",
                b"POST /shelly/webhook\n{\"Event\":\"input.toggle_on\",\"DeviceID\":3}",
                b"POST /shelly/webhook?Event=switch.off\nDeviceID=1&x=%41",
            ],
            webhook_request,
        );
    }

    #[test]
    fn device_parsers_never_panic() {
        let gen1: &[&[u8]] = &[
            br#"{"relays":[{"ison":true}],"meters":[{"power":1,"total":60}],"emeters":[{"power":-1,"total":1}],"inputs":[{"input":1}],"ext_temperature":{"0":{"tC":1}},"temperature":40}"#,
            br#"{"rollers":[{"state":"stop","current_pos":100,"positioning":true,"calibrating":false,"power":0}],"meters":[{"power":2,"total":6},{"power":0,"total":0}],"ext_humidity":{"0":{"hum":55.1}},"ext_temperature":{"0":{"tC":20},"1":{"tC":21}},"adcs":[{"voltage":11.9}],"tmp":{"tC":22,"is_valid":true},"hum":{"value":40,"is_valid":false}}"#,
            br#"{"lights":[{"ison":true,"brightness":55,"mode":"white"}],"rollers":[{"state":"open","current_pos":-1,"positioning":false}],"tmp":{"tC":40}}"#,
        ];
        run(gen1, gen1_status);
        let rpc: &[&[u8]] = &[
            br#"{"sys":{"mac":"A","uptime":1,"available_updates":{}},"switch:0":{"output":true,"apower":-1,"aenergy":{"total":1},"temperature":{"tC":1}},"input:0":{"state":null},"em:0":{"a_act_power":1,"total_act_power":2},"emdata:0":{"total_act":3},"em1:0":{"act_power":1},"em1data:0":{"total_act_energy":1},"pm1:0":{"apower":1},"temperature:100":{"tC":2},"temperature:0":{"tC":3}}"#,
            br#"{"id":1,"error":{"code":-105,"message":"x"}}"#,
            br#"{"types":{"switch.on":{}},"hook_types":["x"],"temperature:100":{"name":"P"}}"#,
            br#"{"cover:0":{"state":"opening","current_pos":40,"pos_control":true,"apower":80,"aenergy":{"total":1},"freq":50},"cover:1":{"state":"half","current_pos":1e300,"pos_control":false},"light:0":{"output":true,"brightness":101},"humidity:0":{"rh":"wet"},"humidity:100":{"rh":50},"voltmeter:100":{"voltage":-1},"em1:2":{"act_power":1,"freq":49.9,"aprt_power":2}}"#,
        ];
        run(rpc, rpc_status);
        let tas: &[&[u8]] = &[
            br#"{"Status":{"Power":"3"},"StatusSTS":{"POWER1":"EIN","UptimeSec":5},"StatusPRM":{"Uptime":"1T01:02:03"},"StatusSNS":{"ENERGY":{"Total":[1,2],"Power":3,"Voltage":[230]},"DS18B20-1":{"Id":"01131B7A4B6F","Temperature":1},"ESP32":{"Temperature":4}}}"#,
            br#"{"StatusSNS":{"ENERGY":{"Total":[1,2],"ExportActive":[0.5,0],"Frequency":50,"ApparentPower":[10,20]},"Shutter1":{"Position":40,"Direction":-1,"Target":0,"Tilt":0},"AM2301":{"Temperature":21,"Humidity":48},"BME280":{"Temperature":20,"Humidity":40,"Pressure":1000},"INA219":{"Voltage":12.1}},"Shutter2":{"Position":100,"Direction":0}}"#,
            // cargo-fuzz crash: the hours of a text uptime overflowed u64 (multiply with overflow).
            br#"{"tuaStsSTS":{"PWER2":"O0S"},"StatusPRM":{"Uptime":"0T+111111111111111111:10000:59"}}"#,
            br#"{"StatusPRM":{"Uptime":"99999999999999999T00:00:00"}}"#,
        ];
        run(tas, tasmota_status);
    }

    #[test]
    fn energy_history_answers_never_panic() {
        run(
            &[
                br#"{"keys":["a_total_act_energy","a_max_voltage","total_act_energy"],"data":[{"ts":60,"period":60,"values":[[1.5,230,2],[2,231,1]]},{"ts":600,"period":"60","values":[[1,1,1]]}],"next_record_ts":660}"#,
                b"Date/time UTC,Active energy Wh (1),Returned energy Wh (1),Min V,Max V\n1970-01-01 00:10,2.10,0.00,232.0,233.5\n1970-01-01 00:20,1,0,230,231\n",
                br#"{"keys":["total_act_energy"],"data":[{"ts":9223372036854775807,"period":86400,"values":[[1],[1]]}]}"#,
            ],
            energy_history,
        );
    }

    #[test]
    fn digest_challenges_never_panic() {
        run(
            &[
                br#"Digest qop="auth", realm="shellyplus2pm-1", nonce="QUJD==", algorithm=SHA-256"#,
                br#"Digest realm="r", nonce="n", stale=true, opaque="", algorithm=MD5"#,
            ],
            digest_challenge,
        );
    }

    /// A complete HTTP/1.1 answer.
    fn answer(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// Answers no device should give, whatever was asked.
    fn hostile_answers() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for offset in [0, 1, 78, 79, 80, 81, 198, 199, 200, 201, 4095, 4096] {
            for tail in ["ü", "😀", "Ошибка\u{0}\u{7f}\u{202e}"] {
                let body = format!("{}{tail}{}", "a".repeat(offset), "z".repeat(3));
                for status in ["200 OK", "500 Interner Fehler"] {
                    out.push(answer(status, "", body.as_bytes()));
                }
            }
        }
        let mut invalid_utf8 = b"{\"a\":\"".to_vec();
        invalid_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3]);
        out.push(answer("200 OK", "", &invalid_utf8));
        out.push(answer("500 Oops", "", &[0xc3; 300]));
        out.push(answer("404 Nicht gefunden", "", "ü".repeat(150).as_bytes()));
        out.push(answer("400 ü", "", b"x"));
        out.push(answer("200 OK", "", "[".repeat(100_000).as_bytes()));
        out.push(answer("200 OK", "", "{\"a\":".repeat(50_000).as_bytes()));
        out.push(answer("200 OK", "", b"1e400"));
        out.push(answer("200 OK", "", b"{\"id\":1,\"result\":1e400}"));
        out.push(answer("200 OK", "", b""));
        out.push(answer(
            "302 Found",
            "Location: http://127.0.0.2:9/\u{fc}\r\n",
            b"",
        ));
        out.push(answer("301 Moved", "", b""));
        out.push(answer(
            "401 Unauthorized",
            "WWW-Authenticate: Digest \u{fc}=\"\r\n",
            b"",
        ));
        out.push(answer(
            "401 Unauthorized",
            "WWW-Authenticate: Basic realm=x\r\n",
            b"",
        ));
        out.push(answer("429 Busy", "", b""));
        out.push(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\":1".to_vec());
        out.push(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n".to_vec());
        out.push(b"HTTP/1.1 999 \xff\xfe\r\n\r\n".to_vec());
        out.push(b"HTTP/1.1 200 OK\r\nX: \xff\xc3\r\nContent-Length: 2\r\n\r\n{}".to_vec());
        out.push(b"garbage\r\n\r\n".to_vec());
        out.push(Vec::new());
        out
    }

    /// Values of every type but the right one (and numbers out of every range).
    const WRONG: &[&str] = &[
        "null",
        "true",
        "\"ü\"",
        "-1",
        "1e308",
        "-1e308",
        "18446744073709551616",
        "-9223372036854775809",
        "[]",
        "{}",
        "0.5",
    ];

    /// The answer `sane` with its JSON body changed at every place: leaf k gets WRONG[k % n], every container
    /// is replaced once, so every field is seen with a wrong type.
    fn wrong_typed(sane: &[u8]) -> Vec<Vec<u8>> {
        let Some(end) = sane.windows(4).position(|w| w == b"\r\n\r\n") else {
            return Vec::new();
        };
        let Ok(body) = serde_json::from_slice::<Value>(&sane[end + 4..]) else {
            return Vec::new();
        };
        let mut paths = Vec::new();
        fn walk(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
            out.push(at.clone());
            let children: Vec<(String, &Value)> = match v {
                Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), v)).collect(),
                Value::Array(a) => a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), v))
                    .collect(),
                _ => return,
            };
            for (k, c) in children {
                at.push(k);
                walk(c, at, out);
                at.pop();
            }
        }
        walk(&body, &mut Vec::new(), &mut paths);
        paths
            .iter()
            .enumerate()
            .map(|(k, path)| {
                let mut v = body.clone();
                let mut place = &mut v;
                for step in path {
                    place = match place {
                        Value::Object(m) => m.get_mut(step).expect("walked"),
                        Value::Array(a) => &mut a[step.parse::<usize>().expect("walked")],
                        _ => unreachable!("walked"),
                    };
                }
                *place = serde_json::from_str(WRONG[k % WRONG.len()]).expect("valid JSON");
                answer("200 OK", "", v.to_string().as_bytes())
            })
            .collect()
    }

    #[cfg(feature = "emulator")]
    /// Records the answers of a healthy emulated device to one run of the `pick` driver.
    fn record(pick: u8, emu: &crate::emulator::Emulator) -> Vec<Vec<u8>> {
        let script = crate::driver::canned::Script::relaying(emu.port(0));
        let (mut dev, mut drv) = exchange_driver(pick, &script);
        exercise(&mut dev, &mut *drv);
        assert!(dev.online, "{}: {:?}", dev.model, dev.last_error);
        script.exchanges().into_iter().map(|(_, a)| a).collect()
    }

    #[cfg(feature = "emulator")]
    fn emulated(pick: u8) -> crate::emulator::Emulator {
        let model = EXCHANGE_MODELS[usize::from(pick) % EXCHANGE_MODELS.len()];
        let mut spec = crate::emulator::DeviceSpec::new(model);
        if pick & 0x40 != 0 {
            spec.password = Some("pw".into());
            // Every run is a new driver with a new nonce: firmware 2.x would run out of its 32 slots.
            if LIBRARY.resolve(model).is_some_and(
                |m| matches!(m, ModelRef::Vendor(v) if v.protocol != crate::models::Protocol::Rest),
            ) {
                spec.auth_mode = crate::emulator::AuthMode::Fw1;
            }
        }
        crate::emulator::Emulator::start(vec![spec], &LIBRARY).expect("emulator starts")
    }

    /// Whole answers through the HTTP client and every driver: each answer of a healthy exchange is replaced
    /// by each hostile answer and by every wrong-typed variant of itself. Nothing may panic, and once the
    /// device answers sanely again the same driver reads it normally.
    /// Runs `f` on a thread with a worker's stack, so deep recursion fails here as it would in a worker.
    fn on_worker_stack(f: impl FnOnce() + Send) {
        std::thread::scope(|s| {
            let run = std::thread::Builder::new()
                .stack_size(crate::actor::worker::STACK_SIZE)
                .spawn_scoped(s, f)
                .unwrap();
            if let Err(panic) = run.join() {
                std::panic::resume_unwind(panic);
            }
        });
    }

    #[cfg(feature = "emulator")]
    #[test]
    fn whole_device_answers_never_panic_and_the_driver_recovers() {
        on_worker_stack(whole_device_answers);
    }

    #[cfg(feature = "emulator")]
    fn whole_device_answers() {
        let hostile = hostile_answers();
        let mut runs = 0;
        let picks: Vec<u8> = (0..EXCHANGE_MODELS.len() as u8)
            .flat_map(|i| [i, i | 0x40, i | 0x80])
            .collect();
        for pick in picks {
            let emu = emulated(pick);
            let sane = record(pick, &emu);
            for (i, good) in sane.iter().enumerate() {
                // Hostile answers at the first exchanges (only the first with credentials or hooks, whose
                // paths differ in headers and later requests); wrong types everywhere but with credentials.
                let plain = pick & 0xc0 == 0;
                let mut variants = if pick & 0x40 == 0 {
                    wrong_typed(good)
                } else {
                    Vec::new()
                };
                if i == 0 || (plain && i < 3) {
                    variants.extend(hostile.iter().cloned());
                }
                for bad in variants {
                    let mut answers = sane.clone();
                    answers[i] = bad;
                    let script = crate::driver::canned::Script::relaying(emu.port(0));
                    script.load(answers);
                    let (mut dev, mut drv) = exchange_driver(pick, &script);
                    exercise(&mut dev, &mut *drv);
                    script.load([]);
                    let r = read(&mut dev, &mut *drv);
                    assert!(
                        r.is_ok() && dev.online,
                        "pick {pick:#x} answer {i}: the driver does not recover: {r:?}"
                    );
                    runs += 1;
                }
            }
        }
        assert!(runs > 1000, "only {runs} runs");
    }

    #[cfg(feature = "emulator")]
    /// Healthy exchanges of every driver are the cargo-fuzz seeds of `device_exchange`; they are written to
    /// the directory in `SMARTDEV_WRITE_SEEDS` when set (`tests/fuzz/seeds/device_exchange`).
    #[test]
    fn healthy_exchanges_are_recorded_for_every_driver() {
        for pick in (0..EXCHANGE_MODELS.len() as u8).flat_map(|i| [i, i | 0x40, i | 0x80]) {
            let emu = emulated(pick);
            let answers = record(pick, &emu);
            assert!(
                answers.len() >= 3,
                "pick {pick:#x}: {} answers",
                answers.len()
            );
            let mut input = vec![pick];
            input.extend(answers.join(ANSWER_SEPARATOR));
            // Replaying the recording gives the same healthy device without any relay.
            let script = crate::driver::canned::Script::default();
            script.load(answers);
            let (mut dev, mut drv) = exchange_driver(pick, &script);
            assert!(
                read(&mut dev, &mut *drv).is_ok() && dev.online,
                "pick {pick:#x}"
            );
            if let Some(dir) = std::env::var_os("SMARTDEV_WRITE_SEEDS") {
                let dir = std::path::Path::new(&dir);
                std::fs::create_dir_all(dir).unwrap();
                std::fs::write(dir.join(format!("healthy-{pick:02x}")), input).unwrap();
            }
        }
    }

    #[test]
    fn raw_exchanges_never_panic() {
        // Mutated and random bytes as whole answers, for every driver; a few answers per run.
        let mut rng = Rng(0xdead_beef_0bad_f00d);
        let hostile = hostile_answers();
        for n in 0..3000 {
            let pick = rng.next() as u8;
            let answers: Vec<Vec<u8>> = (0..1 + rng.below(6))
                .map(|_| {
                    let base = &hostile[rng.below(hostile.len())];
                    if n % 2 == 0 {
                        mutate(&mut rng, base)
                    } else {
                        (0..rng.below(300)).map(|_| rng.next() as u8).collect()
                    }
                })
                .collect();
            let mut data = vec![pick];
            data.extend(answers.join(ANSWER_SEPARATOR));
            device_exchange(&data);
        }
    }
}

/// One piece of the per-device heap, built alone for `examples/bench_heap.rs` to weigh (the live heap it holds
/// while kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapPiece {
    /// `plan::plan_following`: the planned `Device`s and their `Follow`s.
    Plan,
    /// One more copy of every planned `Device` (what a factory keeps, or a snapshot's copy-on-write clone).
    DeviceCopies,
    /// Every device's driver as `driver::for_device` builds it (no tunnel, no broker, no hooks), no I/O.
    Drivers,
}

/// Builds `piece` for every device `settings` configures (`planned`: an earlier [`HeapPiece::Plan`]) and returns
/// it, opaque, so the caller can weigh what it holds and then drop it.
pub fn heap_piece(
    settings: &crate::Settings,
    planned: Option<&dyn std::any::Any>,
    piece: HeapPiece,
) -> Box<dyn std::any::Any> {
    let devices = || {
        &planned
            .and_then(|p| p.downcast_ref::<crate::plan::Planned>())
            .expect("a HeapPiece::Plan")
            .0
    };
    match piece {
        HeapPiece::Plan => Box::new(crate::plan::plan_following(settings).expect("a valid plan")),
        HeapPiece::DeviceCopies => Box::new(devices().clone()),
        HeapPiece::Drivers => {
            let http = crate::driver::http::Http::new(settings, Default::default());
            let drivers: Vec<_> = devices()
                .iter()
                .map(|d| {
                    crate::driver::for_device(
                        d,
                        settings,
                        &http,
                        None,
                        Default::default(),
                        Default::default(),
                    )
                    .expect("a driver")
                })
                .collect();
            Box::new(drivers)
        }
    }
}

/// The inline sizes of the structures every device has (bytes), for `examples/bench_heap.rs`.
pub fn heap_sizes() -> Vec<(&'static str, usize)> {
    use std::mem::size_of;
    vec![
        ("Device", size_of::<Device>()),
        ("Input", size_of::<crate::objects::Input>()),
        ("Output", size_of::<crate::objects::Output>()),
        ("Meter", size_of::<crate::objects::Meter>()),
        ("ModelInfo", size_of::<crate::models::ModelInfo>()),
        ("Shape", size_of::<crate::models::Shape>()),
        ("driver::rpc::Rpc", size_of::<crate::driver::rpc::Rpc>()),
        (
            "worker::Command",
            size_of::<crate::actor::worker::Command>(),
        ),
    ]
}

/// A thread started the way the controller starts a device worker (`ffi/thread.rs`), for
/// `examples/bench_threads.rs`.
pub struct WorkerThread(crate::ffi::thread::OsThread);

impl WorkerThread {
    /// Waits for it to end; `Err` with the payload when its function panicked.
    pub fn join(self) -> std::thread::Result<()> {
        self.0.join()
    }
}

/// Starts `main` on a thread as the controller starts a worker: pthread, named `name`, the workers' stack.
pub fn spawn_worker_thread(
    name: String,
    main: impl FnOnce() + Send + 'static,
) -> std::io::Result<WorkerThread> {
    crate::ffi::thread::spawn(name, crate::actor::worker::STACK_SIZE, main).map(WorkerThread)
}

/// The crypto provider every TLS connection of the library uses (ring, its suite order), for the floor
/// benchmark's devices (`examples/bench_floor/tls.rs`).
pub fn tls_provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    crate::driver::tls::provider()
}

/// The client configuration the library uses for a device pinned with `CertSha256: fingerprint` once the device
/// has chosen TLS 1.2 (its verifier, provider and suites, 1.2 alone), for the floor benchmark's client.
pub fn pinned_tls12_client_config(
    fingerprint: &str,
) -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
    let pin = crate::driver::tls::parse_fingerprint(fingerprint)?;
    Ok(crate::driver::tls::client_config(crate::driver::tls::Trust::Pin(pin))?.tls12())
}
