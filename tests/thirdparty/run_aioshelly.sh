#!/usr/bin/env bash
# Runs aioshelly (pinned in requirements-aioshelly.txt) against `sdctl emulate`: every Gen2+ model initialises,
# switches and notifies (see aioshelly_check.py for what it proves). Creates its virtual environment under
# target/thirdparty/ (PyPI must be reachable the first time) and builds sdctl. Usage: tests/thirdparty/run_aioshelly.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
venv="$target/thirdparty/aioshelly-venv"
req=tests/thirdparty/requirements-aioshelly.txt
# A venv from another pin is rebuilt: the stamp is the requirements file it was made from.
if ! cmp -s "$req" "$venv/requirements.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.txt"
fi
cargo build --quiet --bin sdctl
"$venv/bin/python" tests/thirdparty/aioshelly_check.py "$target/debug/sdctl"
