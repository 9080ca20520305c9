//! What each device's heap is made of: live heap bytes per device (a counting global allocator), for the whole
//! `open` and for its pieces built alone (the plan, a copy of the planned devices, the drivers), with simulated
//! devices and with emulated ShellyPlus1PM (in a child process, so only the library's heap is counted) over
//! HTTP and with the push channel.
//!
//! `cargo run --release --example bench_heap --features fuzzing -- [N=1000]`
//! `... -- N --hold CHANNEL`: opens the emulated devices with `Channel: CHANNEL` and exits without closing, for a
//! heap profiler to list what is live at exit by where it was allocated (`heaptrack`, its "leaked" section).
//! `BENCH_HEAP_LATENCY=MS`: the emulated devices answer that much later (default 0: at once).

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use smartdev::fuzzing::{HeapPiece, heap_piece, heap_sizes};
use smartdev::{Controller, Settings};

/// Counts the bytes and blocks allocated and not yet freed.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);
/// The most `LIVE` has been since it was last reset (transient allocations leave freed holes resident).
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
            BLOCKS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
            BLOCKS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        BLOCKS.fetch_sub(1, Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new) };
        if !q.is_null() {
            grew(new as isize - layout.size() as isize);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Live heap bytes and blocks now.
fn live() -> (isize, isize) {
    (LIVE.load(Relaxed), BLOCKS.load(Relaxed))
}

/// Bytes and blocks per device held by `what` (built while measuring, kept until the line is printed).
fn weigh<T>(label: &str, n: usize, what: impl FnOnce() -> T) -> T {
    let (b0, k0) = live();
    let kept = what();
    let (b1, k1) = live();
    line(label, n, b1 - b0, k1 - k0);
    kept
}

fn line(label: &str, n: usize, bytes: isize, blocks: isize) {
    println!(
        "  {label:<58} {:>8.0} B/device {:>6.1} blocks/device",
        bytes as f64 / n as f64,
        blocks as f64 / n as f64
    );
}

/// The live heap an open controller holds per device, measured once it has settled.
fn weigh_open(label: &str, n: usize, settings: Settings, settled: impl FnOnce(&Controller)) {
    let (b0, k0) = live();
    PEAK.store(b0, Relaxed);
    let ctl = Controller::open(settings, None).expect("open");
    settled(&ctl);
    // Let connector threads end and reads after subscribing settle.
    std::thread::sleep(Duration::from_secs(1));
    let (b1, k1) = live();
    line(label, n, b1 - b0, k1 - k0);
    println!(
        "  {:<58} {:>8.0} B/device",
        "  peak while opening and settling",
        (PEAK.load(Relaxed) - b0) as f64 / n as f64
    );
    weigh("  + a copy of every snapshot (devices())", n, || {
        ctl.devices()
    });
    // What the first reads after open leave behind (learned lists, the mirrors taken, the snapshots).
    let (r0, q0) = live();
    for _ in 0..3 {
        ctl.refresh_all().expect("refresh_all");
    }
    std::thread::sleep(Duration::from_secs(1));
    let (r1, q1) = live();
    line(
        "  + after every device was read 3 times (refresh_all)",
        n,
        r1 - r0,
        q1 - q0,
    );
    ctl.close();
}

fn main() {
    support::maybe_child();
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    println!(
        "{n} devices; {} cores, load average {}",
        support::cores(),
        support::load_average()
    );
    let sizes: Vec<String> = heap_sizes()
        .iter()
        .map(|(k, s)| format!("{k} {s}"))
        .collect();
    println!("inline sizes (bytes): {}", sizes.join(", "));

    // Simulated devices: the plan, device copies and drivers without I/O, then the whole open.
    let dir = std::env::temp_dir().join(format!("smartdev-bench-heap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for model in ["ShellyPlus1PM", "Shelly2PMG3"] {
        let mut yaml = format!(
            "SmartDevices:\n  RefreshInterval: 0\n  SimulationFileFolder: '{}'\n  Devices:\n",
            dir.display()
        );
        for i in 0..n {
            yaml.push_str(&format!(
                "    - {{Name: Dev {i}, Model: {model}, Simulate: true}}\n"
            ));
        }
        println!("simulated {model}:");
        let settings = weigh("settings (parsed configuration)", n, || {
            Settings::from_yaml_str(&yaml).expect("valid")
        });
        let plan = weigh("plan (planned Devices, Follows)", n, || {
            heap_piece(&settings, None, HeapPiece::Plan)
        });
        let copies = weigh("a copy of every planned Device", n, || {
            heap_piece(&settings, Some(plan.as_ref()), HeapPiece::DeviceCopies)
        });
        drop(copies);
        let drivers = weigh("drivers (for_device, no I/O)", n, || {
            heap_piece(&settings, Some(plan.as_ref()), HeapPiece::Drivers)
        });
        drop(drivers);
        drop(plan);
        weigh_open("open (everything, files created)", n, settings, |_| {});
        let _ = std::fs::remove_dir_all(&dir);
    }

    let hold = std::env::args().skip_while(|a| a != "--hold").nth(1);
    let latency = std::env::var("BENCH_HEAP_LATENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut emu = support::EmuChild::start(n, latency);
    if let Some(channel) = hold {
        let ctl = Controller::open(emulated(&emu, &channel), None).expect("open");
        subscribed(&mut emu, &channel, n);
        std::thread::sleep(Duration::from_secs(1));
        println!("open with Channel: {channel}; exiting without closing");
        std::mem::forget(ctl);
        std::process::exit(0);
    }

    // Emulated ShellyPlus1PM: the RPC driver after its first contact, then with the push channel.
    let t = Instant::now();
    println!(
        "emulated ShellyPlus1PM (child process, started in {:.1} s):",
        t.elapsed().as_secs_f64()
    );
    for channel in ["http", "auto"] {
        let settings = weigh(&format!("settings (Channel: {channel})"), n, || {
            emulated(&emu, channel)
        });
        let plan = weigh("plan", n, || heap_piece(&settings, None, HeapPiece::Plan));
        let drivers = weigh("drivers (for_device, before the first contact)", n, || {
            heap_piece(&settings, Some(plan.as_ref()), HeapPiece::Drivers)
        });
        drop((drivers, plan));
        weigh_open(
            &format!("open (everything, Channel: {channel})"),
            n,
            settings,
            |_| subscribed(&mut emu, channel, n),
        );
        // Give the child time to see the sockets close before the next round connects again.
        std::thread::sleep(Duration::from_secs(1));
    }
    emu.stop();
}

/// The configuration of the emulated devices, reached with `Channel: channel` (as `bench_push` opens them).
fn emulated(emu: &support::EmuChild, channel: &str) -> Settings {
    let mut yaml = format!(
        "SmartDevices:\n  Channel: {channel}\n  RefreshInterval: 0\n  PingAllowed: false\n  Devices:\n"
    );
    for (i, port) in emu.ports.iter().enumerate() {
        yaml.push_str(&format!(
            "    - {{Name: D{i}, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}, Inputs: [{{Name: I{i}}}], Outputs: [{{Name: O{i}}}]}}\n"
        ));
    }
    Settings::from_yaml_str(&yaml).expect("valid")
}

/// With the push channel: waits until every device's socket is subscribed.
fn subscribed(emu: &mut support::EmuChild, channel: &str, n: usize) {
    if channel != "auto" {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while emu.subscribed() < n {
        assert!(Instant::now() < deadline, "not all subscribed in 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}
