//! Webhook ingest throughput and POST-to-wake latency on loopback.
//!
//! `cargo run --release --example bench_webhooks -- [EVENTS=100000] [SENDERS=4] [LATENCY_SAMPLES=2000]
//! [CAPACITY=1000000]`
//! Senders keep one HTTP/1.1 connection each (as a busy device or proxy would). Every event is counted and
//! checked for loss; with a `CAPACITY` below `EVENTS` the queue is full and each event evicts one (the fair
//! queue's worst case), and the survivors are checked for order. Latency: from just before the request is written to the moment `WakeFlag::wait` returns.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use smartdev::{Controller, Settings, WakeFlag};

/// Sends one keep-alive request and reads the answer (status line, headers, Content-Length body).
fn send(r: &mut BufReader<TcpStream>, target: &str) {
    // One write: several small segments would meet Nagle + delayed ACK (40 ms each).
    let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
    r.get_mut().write_all(req.as_bytes()).unwrap();
    let mut len = 0;
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
}

fn main() {
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(d)
    };
    let (events, senders, samples) = (arg(1, 100_000), arg(2, 4), arg(3, 2000));
    let capacity = arg(4, 1_000_000);
    let settings = Settings::from_yaml_str(&format!(
        "SmartDevices:\n  ShellyWebhooks: {{Enabled: true, Host: 127.0.0.1, Port: 0, QueueCapacity: {capacity}}}\n  Devices: []\n",
    ))
    .unwrap();
    let wake = WakeFlag::new();
    let ctl = Controller::open(settings, Some(wake.clone())).unwrap();
    let addr: SocketAddr = ctl.webhook_address().unwrap();

    let per = events / senders;
    let t = Instant::now();
    let threads: Vec<_> = (0..senders)
        .map(|s| {
            std::thread::spawn(move || {
                let mut r = BufReader::new(TcpStream::connect(addr).unwrap());
                for n in 0..per {
                    send(
                        &mut r,
                        &format!("/shelly/webhook?Event=switch.on&s={s}&n={n}"),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    let mut got = 0;
    let mut next = vec![0usize; senders];
    while let Some(e) = ctl.pull_webhook_event() {
        let s: usize = e.params["s"].as_str().unwrap().parse().unwrap();
        let n: usize = e.params["n"].as_str().unwrap().parse().unwrap();
        assert!(n >= next[s], "duplicated or reordered event");
        next[s] = n + 1;
        got += 1;
    }
    let dropped = ctl.webhook_queue_stats().dropped;
    assert_eq!(got + dropped as usize, per * senders, "lost events");
    println!(
        "ingest: {got}/{} events from {senders} keep-alive senders in {secs:.2} s = {:.0} events/s, queue capacity {capacity}, dropped {dropped}, cores {}",
        per * senders,
        (per * senders) as f64 / secs,
        std::thread::available_parallelism().map_or(0, |c| c.get())
    );

    wake.clear();
    let mut r = BufReader::new(TcpStream::connect(addr).unwrap());
    let mut lat = Vec::with_capacity(samples);
    for n in 0..samples {
        let t = Instant::now();
        let req = format!("GET /shelly/webhook?Event=switch.on&n={n} HTTP/1.1\r\nHost: x\r\n\r\n");
        r.get_mut().write_all(req.as_bytes()).unwrap();
        assert!(wake.wait(Duration::from_secs(5)));
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        wake.clear();
        // Read the answer so the connection stays in step.
        let mut line = String::new();
        let mut len = 0;
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        ctl.pull_webhook_event().unwrap();
    }
    lat.sort_by(f64::total_cmp);
    let p = |q: f64| lat[((lat.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "POST-to-wake: {samples} samples: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        p(0.5),
        p(0.99),
        lat[lat.len() - 1]
    );
    ctl.close();
}
