"""The aioshelly side of the peer benchmark (examples/peer/run_peer_bench.sh, issue 30): aioshelly (pinned in
tests/thirdparty/requirements-aioshelly.txt) against the devices of one running `sdctl emulate` process, measured
the way examples/bench_peer_side.rs measures smartdev against the same process.

Usage (with the virtual environment's python):
  aioshelly_side.py all PORTS_FILE ADMIN_PORT ROUNDS SAMPLES   every figure; prints `RESULT aioshelly KEY VALUE`
  aioshelly_side.py once PORTS_FILE                            initialises every device, prints their statuses
                                                               as JSON and exits (the whole-process run)
PORTS_FILE holds one device port per line (devices 0, 1, ... of the emulator, all on 127.0.0.1).

What `all` measures, in this order:
- RSS: VmRSS after the imports, then with every device initialised (one WebSocket each, as Home Assistant
  holds them), and the peak (VmHWM);
- push latency: with every device initialised, output 0 of a device is flipped through the emulator's admin
  endpoint; from opening the admin connection until aioshelly's update callback sees the new output
  (RpcUpdateType.STATUS, merged into `device.status`), SAMPLES times over devices in a fixed pseudo-random order;
- open + read in process: ROUNDS times, from creating the aiohttp session until every RpcDevice has finished
  `initialize()` (WebSocket connect, Shelly.GetDeviceInfo, then GetConfig, GetStatus and GetComponents
  together), all concurrently; every device is shut down and the session closed between rounds;
- whole process: ROUNDS times, `python aioshelly_side.py once PORTS_FILE` from spawn to exit.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time

import aiohttp
from aioshelly.common import ConnectionOptions
from aioshelly.rpc_device import RpcDevice, RpcUpdateType

TIMEOUT = 5.0


def status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS:, VmHWM:)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def new_session() -> aiohttp.ClientSession:
    """aiohttp's default connector allows 100 connections in all, and an open WebSocket holds one: an
    application keeping 1,000 devices connected raises the limit (0: none)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))


def read_ports(path: str) -> list[int]:
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


async def open_all(session: aiohttp.ClientSession, ports: list[int]) -> list[RpcDevice]:
    """Creates and initialises one RpcDevice per port, all at once, as an application starting up would.
    No WsServer: it is for devices connecting out (battery devices), and it keys its subscriptions by IP
    address, which every emulated device shares here."""
    devices = [
        await RpcDevice.create(session, None, ConnectionOptions("127.0.0.1", port=port)) for port in ports
    ]
    await asyncio.gather(*(d.initialize() for d in devices))
    bad = [d.port for d in devices if not d.initialized or not d.status]
    if bad:
        raise SystemExit(f"aioshelly: {len(bad)} devices not initialised with a status, e.g. port {bad[0]}")
    return devices


async def close_all(devices: list[RpcDevice]) -> None:
    await asyncio.gather(*(d.shutdown() for d in devices))


async def admin_post(admin_port: int, path: str) -> None:
    """One POST to the emulator's admin endpoint (it closes every connection after its answer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", admin_port)
    writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    answer = await reader.read()
    writer.close()
    if not answer.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"admin {path}: {answer[:200]!r}")


async def push_latency(devices: list[RpcDevice], admin_port: int, samples: int) -> tuple[list[float], int]:
    """Flips output 0 of devices through the admin endpoint; ms until aioshelly's callback saw each change."""
    want: dict[int, bool] = {}
    seen_at: dict[int, float] = {}
    seen = [asyncio.Event() for _ in devices]

    def listener(index: int):
        def on_update(dev: RpcDevice, kind: RpcUpdateType) -> None:
            if kind is RpcUpdateType.STATUS and index in want:
                if dev.status.get("switch:0", {}).get("output") == want[index] and not seen[index].is_set():
                    seen_at[index] = time.perf_counter()
                    seen[index].set()

        return on_update

    for i, d in enumerate(devices):
        d.subscribe_updates(listener(i))
    rng = 0x2545F4914F6CDD1D
    latencies, unseen = [], 0
    for _ in range(samples):
        # xorshift64, as examples/bench_push.rs picks its devices.
        rng ^= (rng << 13) & 0xFFFFFFFFFFFFFFFF
        rng ^= rng >> 7
        rng ^= (rng << 17) & 0xFFFFFFFFFFFFFFFF
        i = rng % len(devices)
        on = not devices[i].status["switch:0"]["output"]
        seen[i].clear()
        want[i] = on
        t = time.perf_counter()
        post = asyncio.create_task(admin_post(admin_port, f"/devices/{i}/output?id=0&state={str(on).lower()}"))
        try:
            await asyncio.wait_for(seen[i].wait(), TIMEOUT)
            latencies.append((seen_at[i] - t) * 1000.0)
        except asyncio.TimeoutError:
            unseen += 1
        await post
        del want[i]
    return latencies, unseen


def quantile(v: list[float], q: float) -> float:
    """The same rank as examples/support/mod.rs `quantile` (nearest, on sorted values)."""
    s = sorted(v)
    return s[round((len(s) - 1) * q)]


def result(key: str, value) -> None:
    print(f"RESULT aioshelly {key} {value}", flush=True)


async def run_all(ports_file: str, admin_port: int, rounds: int, samples: int) -> None:
    ports = read_ports(ports_file)
    n = len(ports)
    rss_before = status_kib("VmRSS:")
    async with new_session() as http:
        devices = await open_all(http, ports)
        # Let the last frames and callbacks settle before reading the memory.
        await asyncio.sleep(1.0)
        rss = status_kib("VmRSS:")
        result("rss_before_kib", rss_before)
        result("rss_kib", rss)
        result("rss_per_device_kib", f"{(rss - rss_before) / n:.1f}")
        result("hwm_kib", status_kib("VmHWM:"))
        latencies, unseen = await push_latency(devices, admin_port, samples)
        if latencies:
            result("push_p50_ms", f"{quantile(latencies, 0.5):.2f}")
            result("push_p99_ms", f"{quantile(latencies, 0.99):.2f}")
            result("push_max_ms", f"{max(latencies):.2f}")
        result("push_samples", len(latencies))
        result("push_unseen", unseen)
        await close_all(devices)
    times = []
    for _ in range(rounds):
        await asyncio.sleep(0.5)
        t = time.perf_counter()
        async with new_session() as http:
            devices = await open_all(http, ports)
            times.append((time.perf_counter() - t) * 1000.0)
            await close_all(devices)
    result("open_ms", f"{statistics.median(times):.0f}")
    result("open_ms_all", ",".join(f"{x:.0f}" for x in times))
    wall = []
    for _ in range(rounds):
        time.sleep(0.5)
        t = time.perf_counter()
        subprocess.run([sys.executable, __file__, "once", ports_file], check=True, stdout=subprocess.DEVNULL)
        wall.append((time.perf_counter() - t) * 1000.0)
    result("process_ms", f"{statistics.median(wall):.0f}")
    result("process_ms_all", ",".join(f"{x:.0f}" for x in wall))


async def run_once(ports: list[int]) -> None:
    async with new_session() as http:
        devices = await open_all(http, ports)
        # What `sdctl --json status` does after reading: every device's state on stdout.
        json.dump([d.status for d in devices], sys.stdout)
        print()
        await close_all(devices)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "once":
        asyncio.run(run_once(read_ports(sys.argv[2])))
    elif len(sys.argv) == 6 and sys.argv[1] == "all":
        asyncio.run(run_all(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
    else:
        raise SystemExit(__doc__)
