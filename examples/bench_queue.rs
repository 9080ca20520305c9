//! The fair event queue at its largest: a full queue of 100,000 events from 1,001 devices, then 1,000,000
//! pushes (90 % from one device), each evicting one. Figures in BENCHMARKS.md.
//!
//! `cargo run --release --features fuzzing --example bench_queue [CAPACITY] [PUSHES]`

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let capacity = args.first().copied().unwrap_or(100_000);
    let pushes = args.get(1).copied().unwrap_or(1_000_000);
    let (push, pull, dropped) = smartdev::fuzzing::bench_full_queue(capacity, pushes);
    println!(
        "full queue of {capacity} events, 1,001 devices: push (each evicting) {push:.0} ns, pull {pull:.0} ns; {dropped} dropped"
    );
}
