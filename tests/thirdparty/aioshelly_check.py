"""A real third-party client against `sdctl emulate`: aioshelly, the library behind Home Assistant's Shelly
integration (version pinned in requirements-aioshelly.txt), run as a user of both would.

What it proves, for every Gen2+ model of the library, one emulated device each:
- aioshelly's own initialisation (WebSocket connect, Shelly.GetDeviceInfo, GetConfig, GetStatus,
  GetComponents {dynamic_only} with its paging) succeeds, and it sees the device's model, MAC and generation;
- a command through aioshelly switches an output (Switch.Set, Light.Set or Cover.Open), and the emulator's state
  changes (read back through the admin endpoint, not through aioshelly);
- aioshelly receives a notification (NotifyStatus) of that change over its WebSocket and merges it into its
  status. Models without an output (i4, H&T, meters) get their change from the admin endpoint instead (an
  input, a load, a temperature), and still must notify aioshelly;
- its script, KVS, BLE and outbound-WebSocket calls answer; and (last device) its reboot drops the connection
  and the device comes back with a fresh uptime.
Gen1 models (aioshelly's block device over HTTP + CoAP) are not checked yet: see `check_gen1` below.

Usage: python aioshelly_check.py SDCTL   (exit 0: every device passed; otherwise each failure is printed)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request

import aiohttp
from aioshelly.common import ConnectionOptions
from aioshelly.const import MODEL_NAMES  # noqa: F401  (imported to prove the installed package is whole)
from aioshelly.rpc_device import RpcDevice, RpcUpdateType, WsServer

TIMEOUT = 10.0


def gen2_models(sdctl: str) -> list[str]:
    out = subprocess.run([sdctl, "--json", "models"], check=True, capture_output=True, text=True).stdout
    return [m["model"] for m in json.loads(out) if m["protocol"] == "RPC"]


def start_emulator(sdctl: str, models: list[str]) -> tuple[subprocess.Popen, list[tuple[str, int]], int]:
    """Starts `sdctl emulate` with one device per model; returns it, (model, port) per device, admin port."""
    proc = subprocess.Popen([sdctl, "emulate", *models], stdout=subprocess.PIPE, text=True)
    devices, admin = [], 0
    assert proc.stdout is not None
    for line in proc.stdout:
        port = int(line.rsplit(":", 1)[1])
        if line.startswith("admin "):
            admin = port
            break
        devices.append((line.split()[0], port))
    if not admin:
        proc.kill()
        raise SystemExit(f"sdctl emulate did not start (exit {proc.wait()})")
    return proc, devices, admin


def admin(port: int, path: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method="POST" if "?" in path else "GET")
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        body = r.read()
    return json.loads(body) if body else {}


async def check_device(
    session: aiohttp.ClientSession, index: int, model: str, port: int, admin_port: int, reboot: bool
) -> None:
    device = await RpcDevice.create(session, WsServer(), ConnectionOptions("127.0.0.1", port=port))
    notified = asyncio.Event()

    def on_update(_dev: RpcDevice, kind: RpcUpdateType) -> None:
        if kind is RpcUpdateType.STATUS:
            notified.set()

    try:
        await asyncio.wait_for(device.initialize(), TIMEOUT)
        assert device.initialized, "not initialised"
        assert device.gen >= 2, f"gen {device.gen}"
        assert device.shelly["mac"] and device.hostname, device.shelly
        device.subscribe_updates(on_update)
        # A copy: aioshelly merges notifications into its status in place.
        status = json.loads(json.dumps(device.status))
        if "switch:0" in status:
            key, field, want = "switch:0", "output", not status["switch:0"]["output"]
            await device.switch_set(0, want)
        elif light := next((c for c in ("light", "cct", "rgb", "rgbw") if f"{c}:0" in status), None):
            # Dimmers, tunable-white and colour lights: each kind has its own Set method (Light.Set, CCT.Set...).
            key, field, want = f"{light}:0", "output", not status[f"{light}:0"]["output"]
            method = {"light": "Light", "cct": "CCT", "rgb": "RGB", "rgbw": "RGBW"}[light]
            await device.call_rpc(f"{method}.Set", {"id": 0, "on": want})
        elif "cover:0" in status:
            await device.cover_open(0)
            key, field, want = "cover:0", "state", "opening"
        elif "input:0" in status:
            admin(admin_port, f"/devices/{index}/input?id=0&state={'false' if status['input:0']['state'] else 'true'}")
            key, field, want = "input:0", "state", not status["input:0"]["state"]
        elif any(k.split(":")[0] in ("em", "em1", "pm1") for k in status):
            admin(admin_port, f"/devices/{index}/load?id=0&watts=123")
            key = next(k for k in status if k.split(":")[0] in ("em", "em1", "pm1"))
            field = {"em": "a_act_power", "em1": "act_power", "pm1": "apower"}[key.split(":")[0]]
            want = 123
        elif "temperature:0" in status:
            admin(admin_port, f"/devices/{index}/sensor?quantity=temperature&id=0&value=31.5")
            key, field, want = "temperature:0", "tC", 31.5
        else:
            raise AssertionError(f"nothing to change among {sorted(status)}")
        await asyncio.wait_for(notified.wait(), TIMEOUT)
        # aioshelly merged the notification into its status: the change is there without polling.
        got = device.status[key][field]
        assert got == want or (isinstance(want, (int, float)) and abs(got - want) < 1), f"{key}.{field} = {got}"
        await check_services(device)
        if reboot:
            await check_reboot(device, on_update)
    finally:
        await device.shutdown()


async def check_services(device: RpcDevice) -> None:
    """The other calls aioshelly offers for every device: scripts, KVS, BLE and outbound WebSocket config, and
    the update check."""
    assert await device.supports_scripts(), "Script methods not listed"
    await device.script_create("aioshelly")
    scripts = await device.script_list()
    script_id = scripts[-1]["id"]
    await device.script_putcode(script_id, "print('hi');")
    assert (await device.script_getcode(script_id))["data"] == "print('hi');"
    await device.kvs_set("aioshelly", {"a": 1})
    assert (await device.kvs_get("aioshelly"))["value"] == {"a": 1}
    assert "enable" in await device.ble_getconfig()
    assert "server" in await device.ws_getconfig()
    assert isinstance(await device.call_rpc("Shelly.CheckForUpdate"), dict)


async def check_reboot(device: RpcDevice, on_update) -> None:
    """aioshelly's reboot: the connection drops (aioshelly reports DISCONNECTED) and it initialises again once
    the device is back, which then reports a fresh uptime."""
    closed = asyncio.Event()

    def watch(dev: RpcDevice, kind: RpcUpdateType) -> None:
        if kind is RpcUpdateType.DISCONNECTED:
            closed.set()
        on_update(dev, kind)

    device.subscribe_updates(watch)
    asked = time.time()
    await device.trigger_reboot(500)
    await asyncio.wait_for(closed.wait(), TIMEOUT)
    for _ in range(int(TIMEOUT * 10)):
        try:
            await asyncio.wait_for(device.initialize(), TIMEOUT)
            break
        except Exception:  # noqa: BLE001 -- refused while restarting: try again
            await asyncio.sleep(0.1)
    assert device.initialized, "not back after the reboot"
    # It booted after the reboot was asked for (by its own clock: unixtime - uptime), whatever the load.
    sys_ = device.status["sys"]
    assert sys_["unixtime"] - sys_["uptime"] >= int(asked) - 1, sys_


async def check_gen1(*_args: object) -> None:
    """Hook for Gen1 (aioshelly's BlockDevice: HTTP /shelly, /settings, /status plus CoAP /cit/d and CoIoT
    status pushes). Left for the emulator's CoIoT support (issue 29, section 1): then start a `COAP()` context,
    `BlockDevice.create(session, coap, options)`, initialise, switch relay 0, and wait for its CoIoT update."""
    raise NotImplementedError("Gen1 over CoAP waits for the emulator's CoIoT sender")


async def main(sdctl: str) -> int:
    models = gen2_models(sdctl)
    proc, devices, admin_port = start_emulator(sdctl, models)
    failures = []
    try:
        async with aiohttp.ClientSession() as session:
            for index, (model, port) in enumerate(devices):
                try:
                    # The last device reboots: by then the emulator has run long enough that a fresh uptime
                    # tells a reboot from none.
                    last = index == len(devices) - 1
                    await check_device(session, index, model, port, admin_port, last)
                except Exception as e:  # noqa: BLE001 -- every failure is reported, then the run fails
                    failures.append(f"{model} (device {index}, port {port}): {type(e).__name__}: {e}")
    finally:
        proc.kill()
        proc.wait()
    for f in failures:
        print("FAIL", f)
    print(f"aioshelly: {len(devices) - len(failures)} of {len(devices)} Gen2+ models passed")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(asyncio.run(main(sys.argv[1])))
