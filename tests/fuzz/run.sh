#!/usr/bin/env bash
# Repeats the fuzzing campaign of tests/fuzz/RESULTS.md: every cargo-fuzz target for RUNS executions.
#
#   tests/fuzz/run.sh                        # every target, 100000 runs each, stable, no sanitizer
#   RUNS=1000000 tests/fuzz/run.sh           # the recorded campaign's minimum
#   TARGETS="config_yaml rpc_status" tests/fuzz/run.sh
#   TOOLCHAIN=nightly SANITIZER=address tests/fuzz/run.sh   # optional: AddressSanitizer needs nightly
#
# Environment (all optional):
#   RUNS        executions per target (default 100000)
#   TARGETS     space-separated targets (default: every target in Cargo.toml)
#   MAX_LEN     -max_len for libFuzzer (default 4096; device_exchange always 16384: its seeds are whole
#               recorded exchanges of up to ~10 KiB)
#   SANITIZER   cargo fuzz -s value (default none: works on stable; panics are still caught)
#   TOOLCHAIN   rustup toolchain to run with, e.g. nightly (default: the active one)
#   FUZZ_ARGS   extra libFuzzer arguments, e.g. "-max_total_time=600"
#   LOG_DIR     keep every target's libFuzzer log there as <target>.log (default: only failed runs' logs kept)
#
# The working corpus is tests/fuzz/corpus/<target>/ (not committed); the committed seeds in
# tests/fuzz/seeds/<target>/ are read as a second corpus directory and never written to. Crashes land in
# tests/fuzz/artifacts/<target>/. Exits non-zero when any target crashed, after running all of them.
set -euo pipefail

fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$fuzz_dir/../.." && pwd)"
cd "$root"

RUNS="${RUNS:-100000}"
MAX_LEN="${MAX_LEN:-4096}"
SANITIZER="${SANITIZER:-none}"
FUZZ_ARGS="${FUZZ_ARGS:-}"
if [ -z "${TARGETS:-}" ]; then
  TARGETS="$(sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz_dir/Cargo.toml" | grep -v '^smartdev-fuzz$' | xargs)"
fi
cargo_cmd=(cargo)
if [ -n "${TOOLCHAIN:-}" ]; then
  cargo_cmd=(cargo "+$TOOLCHAIN")
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

echo "== $("${cargo_cmd[@]}" --version); rustc: $(rustc ${TOOLCHAIN:+"+$TOOLCHAIN"} -V); $(cargo fuzz --version)"
echo "== targets: $TARGETS; runs: $RUNS; sanitizer: $SANITIZER; max_len: $MAX_LEN"
"${cargo_cmd[@]}" fuzz build --fuzz-dir tests/fuzz -s "$SANITIZER"

failed=()
for t in $TARGETS; do
  corpus="tests/fuzz/corpus/$t"
  mkdir -p "$corpus"
  max_len="$MAX_LEN"
  if [ "$t" = device_exchange ]; then
    max_len=16384
  fi
  args=(-runs="$RUNS" -max_len="$max_len")
  if [ -f "tests/fuzz/dicts/$t.dict" ]; then
    args+=(-dict="tests/fuzz/dicts/$t.dict")
  fi
  # shellcheck disable=SC2206 # FUZZ_ARGS is split on purpose
  args+=($FUZZ_ARGS)
  if [ -n "${LOG_DIR:-}" ]; then
    mkdir -p "$LOG_DIR"
    log="$LOG_DIR/$t.log"
  else
    log="$(mktemp "${TMPDIR:-/tmp}/smartdev-fuzz-$t.XXXXXX")"
  fi
  echo "== $t: cargo fuzz run --fuzz-dir tests/fuzz -s $SANITIZER $t $corpus tests/fuzz/seeds/$t -- ${args[*]}"
  start=$(date +%s)
  if "${cargo_cmd[@]}" fuzz run --fuzz-dir tests/fuzz -s "$SANITIZER" "$t" "$corpus" "tests/fuzz/seeds/$t" \
    -- "${args[@]}" >"$log" 2>&1; then
    status=ok
  else
    status=FAILED
    failed+=("$t")
  fi
  end=$(date +%s)
  # The last libFuzzer status line carries executions, cov, ft, corpus size and exec/s.
  last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
  echo "   $status in $((end - start)) s: $last"
  if [ "$status" != ok ]; then
    grep -E 'panicked at|ERROR: libFuzzer|Test unit written' "$log" | sed 's/^/   /' || true
    echo "   full log: $log"
  elif [ -z "${LOG_DIR:-}" ]; then
    rm -f "$log"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "== crashed: ${failed[*]} (inputs in tests/fuzz/artifacts/)"
  exit 1
fi
echo "== every target ran $RUNS executions without a crash"
