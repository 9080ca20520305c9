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
And for a Gen1 Shelly1 (aioshelly's block device, `check_gen1`): initialisation over HTTP and CoAP (`cit/s`
answered over UDP from the device's address), a relay switched, and the CoIoT status it pushes merged.

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
from aioshelly.block_device import COAP, BlockDevice, BlockUpdateType
from aioshelly.rpc_device import RpcDevice, RpcUpdateType, WsServer

TIMEOUT = 10.0


def gen2_models(sdctl: str) -> list[str]:
    out = subprocess.run([sdctl, "--json", "models"], check=True, capture_output=True, text=True).stdout
    return [m["model"] for m in json.loads(out) if m["protocol"] == "RPC"]


def start_emulator(
    sdctl: str, models: list[str], options: list[str] | None = None
) -> tuple[subprocess.Popen, list[tuple[str, int]], int]:
    """Starts `sdctl emulate` with one device per model; returns it, (model, port) per device, admin port."""
    proc = subprocess.Popen([sdctl, "emulate", *(options or []), *models], stdout=subprocess.PIPE, text=True)
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


GEN1_ADDRESS = "127.0.0.2"


async def check_gen1(session: aiohttp.ClientSession, sdctl: str) -> None:
    """Gen1 through aioshelly's BlockDevice: HTTP `/shelly`, `/settings`, `/status` and `/cit/d`, then CoAP
    `GET cit/s` over UDP 5683, which the device answers from its own address (aioshelly matches answers by
    address), and a CoIoT status pushed to the peer set in the device's settings when a relay switches. The
    device has an address of its own (127.0.0.2) because 5683 is one port per address, and port 80 because
    aioshelly refuses other ports for Gen1."""
    proc, devices, admin_port = start_emulator(
        sdctl, ["Shelly1:80,coap"], ["--listen-on", GEN1_ADDRESS]
    )
    try:
        async with COAP() as coap:
            # CoIoT statuses go to aioshelly's socket, as a user sets the peer in the device's settings.
            async with session.get(f"http://{GEN1_ADDRESS}/settings", params={"coiot_peer": "127.0.0.1:5683"}) as r:
                r.raise_for_status()
            device = await BlockDevice.create(session, coap, ConnectionOptions(GEN1_ADDRESS))
            pushed = asyncio.Event()

            def on_update(_dev: BlockDevice, kind: BlockUpdateType) -> None:
                if kind is BlockUpdateType.COAP_PERIODIC:
                    pushed.set()

            device.subscribe_updates(on_update)
            await asyncio.wait_for(device.initialize(), TIMEOUT)
            assert device.initialized and device.gen == 1, device.shelly
            relay = next(b for b in device.blocks if b.type == "relay")
            assert relay.output == 0, relay.current_values()
            await relay.set_state(turn="on")
            # The status the switch pushed (CoIoT, code 0.30) reached aioshelly's blocks without a request.
            await asyncio.wait_for(pushed.wait(), TIMEOUT)
            assert relay.output == 1, relay.current_values()
            await device.shutdown()
    finally:
        proc.kill()
        proc.wait()


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
        async with aiohttp.ClientSession() as session:
            try:
                await check_gen1(session, sdctl)
                print("aioshelly: Gen1 Shelly1 over HTTP and CoAP passed")
            except Exception as e:  # noqa: BLE001 -- reported with the others
                failures.append(f"Gen1 Shelly1 at {GEN1_ADDRESS}:80: {type(e).__name__}: {e}")
    finally:
        proc.kill()
        proc.wait()
    for f in failures:
        print("FAIL", f)
    print(f"aioshelly: {len(devices) + 1 - len(failures)} of {len(devices) + 1} models passed (Gen2+ and one Gen1)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(asyncio.run(main(sys.argv[1])))
