#!/usr/bin/env bash
# The peer benchmark (issue 30): aioshelly (pinned in tests/thirdparty/requirements-aioshelly.txt) and smartdev
# against ONE `sdctl emulate` process of N ShellyPlus1PM answering after LATENCY_MS, one after the other, and a
# table of both: open + read in process, whole process, RSS, push latency. Slow (minutes at N=1000) and not in
# CI; BENCHMARKS.md says what each figure measures.
#
# Usage: examples/peer/run_peer_bench.sh [N=1000] [LATENCY_MS=20] [ROUNDS=5] [SAMPLES=100]
# Creates its virtual environment under ${CARGO_TARGET_DIR:-target}/peer/ (PyPI must be reachable the first
# time), builds release binaries and examples. Traffic only to 127.0.0.1.
set -euo pipefail
trap 'echo "run_peer_bench.sh: failed at line $LINENO" >&2' ERR
cd "$(dirname "$0")/../.."
n="${1:-1000}" latency="${2:-20}" rounds="${3:-5}" samples="${4:-100}"
for v in "$n" "$latency" "$rounds" "$samples"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "usage: $0 [N=1000] [LATENCY_MS=20] [ROUNDS=5] [SAMPLES=100] (whole numbers; '$v' is not)" >&2; exit 2; }
done
[ "$n" -ge 1 ] && [ "$rounds" -ge 1 ] || { echo "$0: N and ROUNDS must be at least 1" >&2; exit 2; }
target="${CARGO_TARGET_DIR:-target}"
work="$target/peer"
venv="$work/aioshelly-venv"
req=tests/thirdparty/requirements-aioshelly.txt
mkdir -p "$work"
# A venv from another pin is rebuilt: the stamp is the requirements file it was made from.
if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi
cargo build --quiet --release --bins --examples
sdctl="$target/release/sdctl"

emu_out="$work/emulator.txt"
devices=()
for _ in $(seq "$n"); do devices+=("ShellyPlus1PM,latency=$latency"); done
"$sdctl" emulate "${devices[@]}" >"$emu_out" &
emu_pid=$!
trap 'kill "$emu_pid" 2>/dev/null || true; wait "$emu_pid" 2>/dev/null || true' EXIT
# Signals end the script through its EXIT trap (a background job ignores Ctrl-C, so the trap must stop it).
trap 'exit 1' INT TERM HUP PIPE
# It prints one line per device (`MODEL <id> http://127.0.0.1:<port>`), then the admin endpoint's.
for _ in $(seq 600); do
  grep -q '^admin ' "$emu_out" && break
  kill -0 "$emu_pid" 2>/dev/null || { echo "sdctl emulate exited:" >&2; cat "$emu_out" >&2; exit 1; }
  sleep 0.1
done
admin=$(sed -n 's|^admin http://127.0.0.1:||p' "$emu_out")
[ -n "$admin" ] || { echo "sdctl emulate printed no admin endpoint within 60 s" >&2; exit 1; }
sed -n '/^admin /!s|.* http://127.0.0.1:\([0-9]*\).*|\1|p' "$emu_out" >"$work/ports.txt"
[ "$(wc -l <"$work/ports.txt")" -eq "$n" ] || { echo "expected $n device lines from sdctl emulate" >&2; exit 1; }
# The devices answer before anything is timed (the emulator prints its lines once every device listens).
for port in $(head -1 "$work/ports.txt") $(tail -1 "$work/ports.txt"); do
  curl -sf --retry 20 --retry-connrefused --retry-delay 1 -o /dev/null "http://127.0.0.1:$port/shelly"
done

config="$work/config.yaml"
{
  echo "SmartDevices:"
  echo "  Channel: auto"
  echo "  RefreshInterval: 0"
  echo "  PingAllowed: false"
  echo "  Devices:"
  i=0
  while read -r port; do
    echo "    - {Name: D$i, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: $port, Outputs: [{Name: O$i}]}"
    i=$((i + 1))
  done <"$work/ports.txt"
} >"$config"

results="$work/results.txt"
: >"$results"
load() { cut -d' ' -f1-3 /proc/loadavg; }
# The emulator's CPU time (utime + stime, in clock ticks) so far: what serving each side cost it.
emu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$emu_pid/stat"; }
hz=$(getconf CLK_TCK)
echo "$n ShellyPlus1PM × $latency ms in one sdctl emulate process (pid $emu_pid); $(nproc) cores"
load_a=$(load)
echo "load average before aioshelly: $load_a"
t0=$(emu_ticks)
"$venv/bin/python" examples/peer/aioshelly_side.py all "$work/ports.txt" "$admin" "$rounds" "$samples" | tee -a "$results"
t1=$(emu_ticks)
echo "RESULT aioshelly emulator_cpu_ms $(((t1 - t0) * 1000 / hz))" | tee -a "$results"
load_s=$(load)
echo "load average before smartdev: $load_s"
"$target/release/examples/bench_peer_side" "$config" "$admin" "$sdctl" "$rounds" "$samples" | tee -a "$results"
t2=$(emu_ticks)
echo "RESULT smartdev emulator_cpu_ms $(((t2 - t1) * 1000 / hz))" | tee -a "$results"
load_e=$(load)
echo "load average after: $load_e"

version=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("aioshelly"))')
awk -v n="$n" -v lat="$latency" -v cores="$(nproc)" -v loads="before aioshelly $load_a; before smartdev $load_s; after $load_e" -v rounds="$rounds" -v version="$version" '
  $1 == "RESULT" { v[$2, $3] = $4 }
  function row(label, key, unit, scale,   a, s) {
    a = v["aioshelly", key]; s = v["smartdev", key]
    if (a == "" && s == "") return
    printf "%-34s %18s %18s %8s\n", label, fmt(a, unit, scale), fmt(s, unit, scale), (a != "" && s != "" && s + 0 > 0) ? sprintf("%.2f×", a / s) : "-"
  }
  function fmt(x, unit, scale) { return x == "" ? "-" : sprintf("%.2f %s", x / scale, unit) }
  END {
    printf "\n%d ShellyPlus1PM, %d ms latency; medians of %d rounds; ratio = aioshelly / smartdev\n", n, lat, rounds
    printf "%-34s %18s %18s %8s\n", "", "aioshelly " version, "smartdev", "ratio"
    row("open + read, in process", "open_ms", "s", 1000)
    row("whole process (spawn to exit)", "process_ms", "s", 1000)
    row("RSS with every device open", "rss_kib", "MiB", 1024)
    row("RSS before open", "rss_before_kib", "MiB", 1024)
    row("RSS growth per device", "rss_per_device_kib", "KiB", 1)
    row("peak RSS (VmHWM)", "hwm_kib", "MiB", 1024)
    row("push latency p50", "push_p50_ms", "ms", 1)
    row("push latency p99", "push_p99_ms", "ms", 1)
    printf "%-34s %18s %18s\n", "push samples (not seen within 5 s)", v["aioshelly", "push_samples"] " (" v["aioshelly", "push_unseen"] ")", v["smartdev", "push_samples"] " (" v["smartdev", "push_unseen"] ")"
    printf "smartdev: every WebSocket open %.2f s after open began (upper bound; aioshelly: inside its open)\n", v["smartdev", "ws_open_ms"] / 1000
    printf "emulator CPU while serving each side (all of its phases): aioshelly %.2f s, smartdev %.2f s\n", v["aioshelly", "emulator_cpu_ms"] / 1000, v["smartdev", "emulator_cpu_ms"] / 1000
    printf "%d cores; load average (1, 5, 15 min) %s\n", cores, loads
    printf "rounds (ms): aioshelly open %s, process %s; smartdev open %s, process %s\n", v["aioshelly", "open_ms_all"], v["aioshelly", "process_ms_all"], v["smartdev", "open_ms_all"], v["smartdev", "process_ms_all"]
  }' "$results"
