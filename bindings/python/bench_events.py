"""How long an emulated device's event takes to reach ``async for event in ctl.events()``.

Starts ``sdctl emulate ShellyPlus1PM``, opens a controller on it (the event comes over the device's push
socket), then N times: asks the emulator's admin port to fire ``input.toggle_on`` (the state change) and
measures until the ``async for`` in the running asyncio loop receives the event, one event every 60 ms
(below the library's per-device flood limit of 20 a second). Prints p50, p99 and the maximum in milliseconds. The admin request is sent from the loop itself (asyncio streams), so the figure is
emulator -> WebSocket -> library -> wake descriptor -> loop ``add_reader`` -> the ``async for``.

    cargo build --release && PYTHONPATH=bindings/python SMARTDEV_LIB=target/release/libsmartdev.so \\
        python3 bindings/python/bench_events.py --sdctl target/release/sdctl [-n 500]

(With the package installed, ``python3 bench_events.py --sdctl /path/to/sdctl`` is enough.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import List, Tuple

from smartdev import Controller


#: An event not received within this many seconds is counted as lost and fired again (not timed).
LOST_AFTER_S = 2.0
#: Seconds between two events: the library queues at most 20 events a second per device after a burst of 50
#: (src/webhook/queue.rs) and drops the excess as a flood, so the benchmark stays below that rate.
PACE_S = 0.06


def start_emulator(sdctl: str) -> Tuple["subprocess.Popen[bytes]", int, int]:
    """``sdctl emulate ShellyPlus1PM``; returns the process, the device's port and the admin port."""
    proc = subprocess.Popen([sdctl, "emulate", "ShellyPlus1PM"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    text = b""
    while b"admin " not in text:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
        if not chunk:
            proc.kill()
            raise SystemExit(f"sdctl emulate printed no admin line (so far: {text!r})")
        text += chunk
    lines = text.decode().splitlines()
    device = next(int(line.rsplit(":", 1)[1]) for line in lines if not line.startswith("admin "))
    admin = next(int(line.rsplit(":", 1)[1]) for line in lines if line.startswith("admin "))
    return proc, device, admin


async def admin_post(port: int, path: str) -> None:
    """``POST http://127.0.0.1:<port><path>`` from the loop; reads the whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    await reader.read()
    writer.close()
    await writer.wait_closed()


async def measure(ctl: Controller, admin: int, count: int) -> List[float]:
    fire = "/devices/0/fire?event=input.toggle_on&id=0"
    # The push socket is opened right after open; fire until the first event arrives (it is not timed).
    while b'"connections":1' not in urllib.request.urlopen(f"http://127.0.0.1:{admin}/devices/0/ws").read():
        await asyncio.sleep(0.05)
    ctl.read_device("Pump")  # as the tests do: the device is known (and its identity confirmed) before timing
    events = ctl.events()
    first = asyncio.ensure_future(events.__anext__())
    while not first.done():
        await admin_post(admin, fire)
        await asyncio.wait({first}, timeout=0.1)
    await asyncio.sleep(1.0)  # let the device's rate budget refill after the warm-up's burst
    while ctl.pull_webhook_event() is not None:  # the extra warm-up events
        pass
    samples: List[float] = []
    lost: List[float] = []
    began = time.perf_counter()
    while len(samples) < count:
        await asyncio.sleep(PACE_S)
        start = time.perf_counter()
        sent = asyncio.ensure_future(admin_post(admin, fire))
        try:
            event = await asyncio.wait_for(events.__anext__(), LOST_AFTER_S)
        except asyncio.TimeoutError:
            # Never queued by the library (not a binding matter: the queue is empty and the descriptor quiet).
            lost.append(start - began)
            await sent
            continue
        samples.append((time.perf_counter() - start) * 1000.0)
        assert event["Event"] == "input.toggle_on", event
        await sent
    if lost:
        print(f"{len(lost)} fired events never arrived (at {', '.join(f'{t:.1f}' for t in lost)} s); not timed")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdctl", default=os.environ.get("SDCTL_BIN", "sdctl"), help="the sdctl binary")
    parser.add_argument("-n", type=int, default=500, help="events to time (default 500)")
    args = parser.parse_args()
    proc, device, admin = start_emulator(args.sdctl)
    try:
        yaml = (
            "SmartDevices:\n  PingAllowed: false\n  RefreshInterval: 0\n  Devices:\n"
            f"    - {{Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {device}}}\n"
        )
        with Controller(yaml=yaml) as ctl:
            samples = sorted(asyncio.run(measure(ctl, admin, args.n)))
    finally:
        proc.terminate()
        proc.wait(10)
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"emulator event -> async for, {len(samples)} events: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
          f"max {samples[-1]:.2f} ms (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
