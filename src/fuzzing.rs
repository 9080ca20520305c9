//! Entry points for fuzzing the parsers that read untrusted input: configuration YAML, webhook requests,
//! device answers (Gen1, RPC, Tasmota) and digest challenges. Each takes arbitrary bytes and must never
//! panic. Used by the cargo-fuzz targets in `tests/fuzz/` (feature `fuzzing`) and by the deterministic
//! property tests below, which run in `cargo test`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::LazyLock;

use serde_json::Value;

use crate::config::ConfigLoader;
use crate::models::{ModelLibrary, ModelRef};
use crate::objects::{Device, TempProbe};
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

/// Applies a Gen1 `/status` answer to devices of every Gen1 meter style.
pub fn gen1_status(data: &[u8]) {
    let Some(v) = json(data) else { return };
    let lib = &*LIBRARY;
    for model in ["Shelly2.5", "Shelly3EM", "Shelly1", "ShellyEM"] {
        if let (mut d, Some(m)) = device(model, lib) {
            crate::driver::gen1::apply_status(&mut d, &m, &v, "T");
        }
    }
}

/// Reads an RPC answer frame, a `Shelly.GetConfig` result and a `Shelly.GetStatus` result for every RPC
/// meter style.
pub fn rpc_status(data: &[u8]) {
    let Some(v) = json(data) else { return };
    let _ = crate::driver::rpc::parse_frame(v.clone(), "Shelly.GetStatus");
    let _ = crate::driver::rpc::probe_ids(&v);
    let _ = crate::webhook::install::supported_events(&v);
    let lib = &*LIBRARY;
    for model in [
        "ShellyPlus2PM",
        "ShellyProEM50",
        "ShellyPro3EM",
        "ShellyPlusPMMini",
        "Shelly1G3",
    ] {
        if let (mut d, Some(m)) = device(model, lib) {
            crate::driver::rpc::apply_status(&mut d, &m, &v, "T");
        }
    }
}

/// Applies a Tasmota `Status 0` answer.
pub fn tasmota_status(data: &[u8]) {
    let Some(v) = json(data) else { return };
    let (mut d, _) = device("Tasmota", &LIBRARY);
    crate::driver::tasmota::apply_status(&mut d, &v, "T");
    let _ = crate::driver::tasmota::power_mask(&v);
}

/// Parses a `WWW-Authenticate` value and answers it.
pub fn digest_challenge(data: &[u8]) {
    let Some(t) = text(data) else { return };
    if let Some(ch) = crate::driver::digest::parse_challenge(t) {
        let _ = crate::driver::digest::authorization(&ch, "admin", "pw", "POST", "/rpc", 1, "c");
    }
}

#[cfg(test)]
mod tests {
    //! Deterministic property tests: every target gets a few thousand inputs — valid seeds, their random
    //! mutations, and random bytes — and must not panic.

    use super::*;

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
        let gen1: &[&[u8]] = &[br#"{"relays":[{"ison":true}],"meters":[{"power":1,"total":60}],"emeters":[{"power":-1,"total":1}],"inputs":[{"input":1}],"ext_temperature":{"0":{"tC":1}},"temperature":40}"#];
        run(gen1, gen1_status);
        let rpc: &[&[u8]] = &[
            br#"{"sys":{"mac":"A","uptime":1,"available_updates":{}},"switch:0":{"output":true,"apower":-1,"aenergy":{"total":1},"temperature":{"tC":1}},"input:0":{"state":null},"em:0":{"a_act_power":1,"total_act_power":2},"emdata:0":{"total_act":3},"em1:0":{"act_power":1},"em1data:0":{"total_act_energy":1},"pm1:0":{"apower":1},"temperature:100":{"tC":2},"temperature:0":{"tC":3}}"#,
            br#"{"id":1,"error":{"code":-105,"message":"x"}}"#,
            br#"{"types":{"switch.on":{}},"hook_types":["x"],"temperature:100":{"name":"P"}}"#,
        ];
        run(rpc, rpc_status);
        let tas: &[&[u8]] = &[
            br#"{"Status":{"Power":"3"},"StatusSTS":{"POWER1":"EIN","UptimeSec":5},"StatusPRM":{"Uptime":"1T01:02:03"},"StatusSNS":{"ENERGY":{"Total":[1,2],"Power":3,"Voltage":[230]},"DS18B20-1":{"Id":"01131B7A4B6F","Temperature":1},"ESP32":{"Temperature":4}}}"#,
            // cargo-fuzz crash: the hours of a text uptime overflowed u64 (multiply with overflow).
            br#"{"tuaStsSTS":{"PWER2":"O0S"},"StatusPRM":{"Uptime":"0T+111111111111111111:10000:59"}}"#,
            br#"{"StatusPRM":{"Uptime":"99999999999999999T00:00:00"}}"#,
        ];
        run(tas, tasmota_status);
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
}
