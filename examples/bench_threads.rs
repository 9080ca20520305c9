//! The floor of the design card's thread per device: what starting, waking once and joining N threads costs on
//! this machine, with nothing else running in the process (no sockets, no devices).
//!
//! `cargo run --release --features fuzzing --example bench_threads -- [N=1000] [ROUNDS=10] [STACK_TOUCH_KIB=16]`
//!
//! Each round spawns N threads, with `std::thread` and the way the controller spawns its workers (pthread,
//! `ffi/thread.rs`; named, 256 KiB stacks), alternately; each touches
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

/// A thread started one of the two ways.
enum Started {
    Std(std::thread::JoinHandle<()>),
    Worker(smartdev::fuzzing::WorkerThread),
}

impl Started {
    fn start(as_worker: bool, name: String, main: impl FnOnce() + Send + 'static) -> Started {
        if as_worker {
            Started::Worker(smartdev::fuzzing::spawn_worker_thread(name, main).expect("spawn"))
        } else {
            Started::Std(
                std::thread::Builder::new()
                    .name(name)
                    .stack_size(256 * 1024)
                    .spawn(main)
                    .expect("spawn"),
            )
        }
    }

    fn join(self) {
        match self {
            Started::Std(t) => t.join().expect("join"),
            Started::Worker(t) => t.join().expect("join"),
        }
    }
}

/// Medians over the rounds: start, wake and join in ms, CPU per round in ms.
fn measure(n: usize, rounds: usize, kib: usize, as_worker: bool) -> [f64; 4] {
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
            threads.push(Started::start(
                as_worker,
                format!("sd-dev-{i}"),
                move || {
                    let x = touch(kib);
                    let _ = ready.send(());
                    let mut got = 0;
                    while rx.recv().is_ok() {
                        got += 1;
                    }
                    std::hint::black_box((x, got));
                },
            ));
            txs.push(tx);
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
            t.join();
        }
        let t3 = Instant::now();
        cpu.push((support::cpu_ticks() - cpu0) as f64 * 10.0);
        start.push((t1 - t0).as_secs_f64() * 1000.0);
        wake.push((t2 - t1).as_secs_f64() * 1000.0);
        join.push((t3 - t2).as_secs_f64() * 1000.0);
    }
    [&mut start, &mut wake, &mut join, &mut cpu].map(|v| {
        v.sort_by(f64::total_cmp);
        quantile(v, 0.5)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (n, rounds, kib) = (arg(1, 1000), arg(2, 10).max(1), arg(3, 16));
    println!(
        "{n} threads (256 KiB stacks, {kib} KiB touched), {rounds} rounds, {} cores, load average {}:",
        support::cores(),
        support::load_average(),
    );
    // Alternately, so a change of the machine's speed falls on both.
    let mut figures = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        for (k, as_worker) in [false, true].into_iter().enumerate() {
            figures[k].push(measure(n, rounds.div_ceil(2), kib, as_worker));
        }
    }
    for (k, how) in ["std::thread", "as the workers (pthread, ffi/thread.rs)"]
        .iter()
        .enumerate()
    {
        let f = &figures[k];
        let mean = |i: usize| f.iter().map(|x| x[i]).sum::<f64>() / f.len() as f64;
        println!(
            "  {how}: median start {:.1} ms, wake {:.1} ms, join {:.1} ms; CPU per round {:.0} ms (10 ms ticks) = {:.1} µs per thread",
            mean(0),
            mean(1),
            mean(2),
            mean(3),
            mean(3) * 1000.0 / n as f64
        );
    }
}
