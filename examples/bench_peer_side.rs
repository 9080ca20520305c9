//! The smartdev side of the peer benchmark against aioshelly (`examples/peer/run_peer_bench.sh`, issue 30):
//! the devices of one running `sdctl emulate` process, measured as `examples/peer/aioshelly_side.py` measures
//! aioshelly against the same process.
//!
//! `cargo run --release --example bench_peer_side -- CONFIG ADMIN_PORT SDCTL [ROUNDS=5] [SAMPLES=100]`
//!
//! CONFIG names every device (`D<i>`, output `O<i>`, in the emulator's order) with `Channel: auto`, no background
//! refresh and no ping; the script writes it. Prints `RESULT smartdev KEY VALUE` lines, measured in this order:
//! - RSS: VmRSS before `Controller::open`, then with every device open (its WebSocket up), and the peak;
//! - every WebSocket open: after the first `open` returned, device by device, the admin endpoint's
//!   `GET /devices/<i>/ws` until it counts a connection; the time from the start of `open` until the last one
//!   does. An upper bound (the sweep's own requests are in it), and connections, not subscriptions: the admin
//!   endpoint does not say whether a connection sent its first request;
//! - push latency: output 0 of a device flipped through the admin endpoint; from opening the admin connection
//!   until `Controller::output` shows the new state (polled every 50 µs), SAMPLES times, devices in the same
//!   pseudo-random order as the aioshelly side;
//! - open + read in process: ROUNDS times `Controller::open` (which returns after reading every device), each
//!   closed before the next;
//! - whole process: ROUNDS times `SDCTL --config CONFIG --json status`, from spawn to exit (a one-shot
//!   command: it reads over HTTP, without the push channel).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use smartdev::{Controller, Identity, Settings};
use support::quantile;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!(
            "usage: bench_peer_side CONFIG ADMIN_PORT SDCTL [ROUNDS=5] [SAMPLES=100] (see the file's comment)"
        );
        std::process::exit(2);
    }
    let (config, sdctl) = (&args[1], &args[3]);
    let admin: u16 = args[2].parse().expect("ADMIN_PORT is a port number");
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (rounds, samples) = (arg(4, 5), arg(5, 100));
    let settings = Settings::from_file(config).expect("CONFIG is a valid configuration");

    let rss_before = support::status_kib("VmRSS:");
    let t = Instant::now();
    let ctl = Controller::open(settings.clone(), None).expect("open");
    let n = all_read(&ctl);
    for i in 0..n {
        while admin_call(admin, "GET", &format!("/devices/{i}/ws"))["connections"].as_u64()
            < Some(1)
        {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "device {i}: no WebSocket after 120 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    result(
        "ws_open_ms",
        format!("{:.0}", t.elapsed().as_secs_f64() * 1000.0),
    );
    // As the aioshelly side: let the last frames settle before reading the memory.
    std::thread::sleep(Duration::from_secs(1));
    let rss = support::status_kib("VmRSS:");
    result("rss_before_kib", rss_before);
    result("rss_kib", rss);
    result(
        "rss_per_device_kib",
        format!("{:.1}", (rss - rss_before) as f64 / n as f64),
    );
    result("hwm_kib", support::status_kib("VmHWM:"));

    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let (mut lat, mut unseen) = (Vec::with_capacity(samples), 0);
    for _ in 0..samples {
        // xorshift64, as examples/bench_push.rs and the aioshelly side pick their devices.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        match flip_and_wait(&ctl, admin, (rng % n as u64) as usize) {
            Some(ms) => lat.push(ms),
            None => unseen += 1,
        }
    }
    lat.sort_by(f64::total_cmp);
    if let Some(max) = lat.last() {
        result("push_p50_ms", format!("{:.2}", quantile(&lat, 0.5)));
        result("push_p99_ms", format!("{:.2}", quantile(&lat, 0.99)));
        result("push_max_ms", format!("{max:.2}"));
    }
    result("push_samples", lat.len());
    result("push_unseen", unseen);
    ctl.close();

    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        let ctl = Controller::open(settings.clone(), None).expect("open");
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        all_read(&ctl);
        ctl.close();
    }
    report_rounds("open_ms", &times);

    let mut wall = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        std::thread::sleep(Duration::from_millis(500));
        let t = Instant::now();
        let status = Command::new(sdctl)
            .args(["--config", config, "--json", "status"])
            .stdout(Stdio::null())
            .status()
            .expect("running sdctl");
        wall.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(status.success(), "sdctl status: {status}");
    }
    report_rounds("process_ms", &wall);
}

fn result(key: &str, value: impl std::fmt::Display) {
    println!("RESULT smartdev {key} {value}");
}

/// The median and every round's figure.
fn report_rounds(key: &str, v: &[f64]) {
    let all: Vec<String> = v.iter().map(|x| format!("{x:.0}")).collect();
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    result(key, format!("{:.0}", quantile(&sorted, 0.5)));
    result(&format!("{key}_all"), all.join(","));
}

/// The number of devices; panics unless `open` read every one (online, output 0 known).
fn all_read(ctl: &Controller) -> usize {
    let devices = ctl.devices();
    for d in &devices {
        assert!(
            d.online && d.outputs.first().is_some_and(|o| o.state.is_some()),
            "{} not read: {:?}",
            d.name,
            d.last_error
        );
    }
    devices.len()
}

/// One request to the emulator's admin endpoint: its JSON answer.
fn admin_call(port: u16, method: &str, path: &str) -> serde_json::Value {
    admin_answer(admin_send(port, method, path), path)
}

/// Sends a request to the admin endpoint; the answer is for [`admin_answer`].
fn admin_send(port: u16, method: &str, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("admin endpoint");
    s.write_all(
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .expect("admin request");
    s
}

/// The answer's JSON body (the admin endpoint closes every connection after its answer).
fn admin_answer(mut s: TcpStream, path: &str) -> serde_json::Value {
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("admin answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "admin {path}: {answer}");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("admin {path}: {e}: {body}"))
}

/// Flips output `O<i>` through the admin endpoint and waits for the controller's snapshot to show it: ms from
/// opening the admin connection, or `None` when not seen within 5 s.
fn flip_and_wait(ctl: &Controller, admin: u16, i: usize) -> Option<f64> {
    let out = Identity::name(format!("O{i}"));
    let on = ctl.output(out.clone()).unwrap().state != Some(true);
    let path = format!("/devices/{i}/output?id=0&state={on}");
    let t = Instant::now();
    // The answer is read after the change is seen, as the aioshelly side awaits its POST afterwards.
    let s = admin_send(admin, "POST", &path);
    let limit = t + Duration::from_secs(5);
    while ctl.output(out.clone()).unwrap().state != Some(on) && Instant::now() < limit {
        std::thread::sleep(Duration::from_micros(50));
    }
    let seen = Instant::now() < limit;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    admin_answer(s, &path);
    seen.then_some(ms)
}
