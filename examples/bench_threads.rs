//! The floor of the design card's thread per device: what starting, waking once and joining N threads costs on
//! this machine, with nothing else running in the process (no sockets, no devices).
//!
//! `cargo run --release --example bench_threads -- [N=1000] [ROUNDS=10] [STACK_TOUCH_KIB=16]`
//!
//! Each round spawns N threads the way the controller spawns its workers (named, 256 KiB stacks), each touches
//! `STACK_TOUCH_KIB` of its stack (a worker's stack after open touches about 16 KiB: see BENCHMARKS.md) and
//! waits on its own channel; the main thread then sends each one message (one wake-up each, as a `refresh_all`
//! does) and joins them all. Prints the median wall time of start, wake and join, and the process's CPU (utime +
//! stime) per round. Whatever the library does per device comes on top of this.

mod support;

use std::time::Instant;

use support::quantile;

fn touch(kib: usize) -> u8 {
    let mut buf = [0u8; 64 * 1024];
    let n = (kib * 1024).min(buf.len());
    for i in (0..n).step_by(4096) {
        buf[i] = i as u8;
    }
    std::hint::black_box(&buf)[n.saturating_sub(1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, rounds, kib) = (arg(1, 1000), arg(2, 10).max(1), arg(3, 16));
    let (mut start, mut wake, mut join, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let cpu0 = support::cpu_ticks();
        let t0 = Instant::now();
        let mut txs = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        let (ready_tx, ready_rx) = crossbeam_channel::unbounded::<()>();
        for i in 0..n {
            let (tx, rx) = crossbeam_channel::bounded::<()>(1);
            let ready = ready_tx.clone();
            let t = std::thread::Builder::new()
                .name(format!("sd-dev-{i}"))
                .stack_size(256 * 1024)
                .spawn(move || {
                    let x = touch(kib);
                    let _ = ready.send(());
                    let mut got = 0;
                    while rx.recv().is_ok() {
                        got += 1;
                    }
                    std::hint::black_box((x, got));
                })
                .expect("spawn");
            txs.push(tx);
            threads.push(t);
        }
        for _ in 0..n {
            ready_rx.recv().expect("ready");
        }
        let t1 = Instant::now();
        for tx in &txs {
            tx.send(()).expect("send");
        }
        let t2 = Instant::now();
        drop(txs);
        for t in threads {
            t.join().expect("join");
        }
        let t3 = Instant::now();
        cpu.push((support::cpu_ticks() - cpu0) as f64 * 10.0);
        start.push((t1 - t0).as_secs_f64() * 1000.0);
        wake.push((t2 - t1).as_secs_f64() * 1000.0);
        join.push((t3 - t2).as_secs_f64() * 1000.0);
    }
    for v in [&mut start, &mut wake, &mut join, &mut cpu] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "{n} threads (256 KiB stacks, {kib} KiB touched), {rounds} rounds, {} cores, load average {}: median start {:.1} ms, wake {:.1} ms, join {:.1} ms; CPU per round {:.0} ms (10 ms ticks) = {:.1} µs per thread",
        support::cores(),
        support::load_average(),
        quantile(&start, 0.5),
        quantile(&wake, 0.5),
        quantile(&join, 0.5),
        quantile(&cpu, 0.5),
        quantile(&cpu, 0.5) * 1000.0 / n as f64
    );
}
