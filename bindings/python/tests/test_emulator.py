"""Against ``sdctl emulate`` over real HTTP: switching, a meter reading, and a blackholed device timing out.

Skipped unless ``SDCTL_BIN`` names the ``sdctl`` binary (``cargo test --test python_binding`` sets it).
"""

from __future__ import annotations

import os
import select
import subprocess
import unittest
import urllib.request
from typing import List, Optional, Tuple

import smartdev
from smartdev import Controller, WrongDeviceError

SDCTL_BIN = os.environ.get("SDCTL_BIN")


def start_emulator(*devices: str) -> Tuple["subprocess.Popen[bytes]", List[int], int]:
    """Starts ``sdctl emulate``; returns the process, each device's port and the admin port."""
    proc, served, admin = start_emulator_served(*devices)
    return proc, [port for port, _ in served], admin


def start_emulator_served(
    *devices: str,
) -> Tuple["subprocess.Popen[bytes]", List[Tuple[int, Optional[str]]], int]:
    """Starts ``sdctl emulate``; returns the process, each device's port and certificate fingerprint (``tls``
    devices; else ``None``), and the admin port."""
    assert SDCTL_BIN is not None
    proc = subprocess.Popen([SDCTL_BIN, "emulate", *devices], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        text = b""
        # `MODEL <id> http://127.0.0.1:<port>` per device (tls: `https://…` and `sha256=<fingerprint>`), then
        # `admin http://…`.
        while b"admin " not in text:
            ready, _, _ = select.select([proc.stdout], [], [], 10)
            chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                raise RuntimeError(f"sdctl emulate printed no admin line (so far: {text!r})")
            text += chunk
        served: List[Tuple[int, Optional[str]]] = []
        admin = 0
        for line in text.decode().splitlines():
            fields = line.split()
            if fields[0] == "admin":
                admin = int(fields[1].rsplit(":", 1)[1])
                continue
            fingerprint = fields[3].removeprefix("sha256=") if len(fields) == 4 else None
            served.append((int(fields[2].rsplit(":", 1)[1]), fingerprint))
        return proc, served, admin
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def stop_emulator(proc: "subprocess.Popen[bytes]") -> None:
    """Ends an emulator :func:`start_emulator` started (killed when it does not stop within 10 s)."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def post_admin(admin: int, path: str) -> bytes:
    """``POST`` to the emulator's admin endpoint; returns the answer's body."""
    req = urllib.request.Request(f"http://127.0.0.1:{admin}{path}", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=5) as answer:
        return answer.read()  # type: ignore[no-any-return]


@unittest.skipUnless(SDCTL_BIN, "SDCTL_BIN is not set")
class EmulatorTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proc, ports, self.admin = start_emulator("ShellyPlus1PM")
        self.addCleanup(self.stop)
        self.port = ports[0]

    def stop(self) -> None:
        stop_emulator(self.proc)

    def post_admin(self, path: str) -> bytes:
        return post_admin(self.admin, path)

    def yaml(self) -> str:
        return (
            "SmartDevices:\n"
            "  PingAllowed: false\n"
            "  ResponseTimeout: 0.3\n"
            "  RetryCount: 0\n"
            "  Devices:\n"
            f"    - {{Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {self.port}}}\n"
        )

    def test_another_device_at_the_address_is_refused(self) -> None:
        # The configured MAC is not the emulated device's: it is another device, never switched.
        yaml = self.yaml().replace(
            f"Port: {self.port}}}", f"Port: {self.port}, MAC: a8-03-2a-b1-23-45, Outputs: [{{Name: Valve}}]}}"
        ).replace("  Devices:", "  Channel: http\n  FollowMoves: false\n  Devices:")
        with Controller(yaml=yaml) as ctl:
            with self.assertRaises(WrongDeviceError) as caught:
                ctl.change_output("Valve", True)
            self.assertIn("A8:03:2A:B1:23:45", str(caught.exception))
            self.assertEqual(caught.exception.code, 308)
            with self.assertRaises(WrongDeviceError):
                ctl.read_device("Pump")

    def test_switch_meter_and_timeout(self) -> None:
        with Controller(yaml=self.yaml()) as ctl:
            dev = ctl.read_device("Pump")
            self.assertIs(dev["Online"], True)
            self.assertEqual(dev["Protocol"], "RPC")
            self.assertIsNotNone(dev["MacAddress"])

            self.assertEqual(ctl.change_output(1, True), (True, True))
            self.assertEqual(ctl.change_output("Output 1", True), (True, False))
            self.assertEqual(ctl.toggle_output(1), (False, True))
            self.assertEqual(ctl.change_output(1, True), (True, True))

            self.post_admin("/devices/0/load?id=0&watts=100")
            ctl.refresh_all()
            meter = ctl.meter(1)
            self.assertEqual(meter["Power"], 100.0)
            self.assertIsNotNone(meter["Voltage"])
            self.assertIsNotNone(meter["Energy"])

            self.assertIn(b"true", self.post_admin("/devices/0/fault?kind=blackhole"))
            with self.assertRaises(smartdev.DeviceTimeoutError) as cm:
                ctl.read_device("Pump")
            e = cm.exception
            self.assertIsInstance(e, TimeoutError)
            self.assertEqual((e.code, e.code_name), (300, "SD_TIMEOUT"))
            self.assertIn("timed out", str(e))
            with self.assertRaises(TimeoutError):
                ctl.change_output(1, False)
            self.assertIs(ctl.read_device_online("Pump"), False)  # not an error: the answer is "offline"

            self.post_admin("/devices/0/fault?kind=none")
            self.assertIs(ctl.read_device_online("Pump"), True)


    def test_a_device_event_is_pushed_over_the_socket_and_wakes_select(self) -> None:
        yaml = self.yaml() + "    # no Webhooks: the event comes over the device's WebSocket (Channel: auto)\n"
        with Controller(yaml=yaml) as ctl:
            fd = ctl.wake_fd()
            # Subscribed once the socket has been opened (in the background, right after open).
            for _ in range(200):
                if b'"connections":1' in self.get_admin("/devices/0/ws"):
                    break
                select.select([], [], [], 0.05)
            ctl.read_device("Pump")
            event = None
            for _ in range(100):
                self.post_admin("/devices/0/fire?event=input.toggle_on&id=0")
                if select.select([fd], [], [], 0.1)[0]:
                    ctl.clear_wake()
                    event = ctl.pull_webhook_event()
                    break
            assert event is not None, "no event pushed"
            self.assertEqual(event["Event"], "input.toggle_on")
            self.assertEqual(event["Channel"], "push")
            self.assertEqual(event["Device"], "Pump")
            self.assertEqual(event["ObjectType"], "input")

    def get_admin(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}{path}", timeout=5) as answer:
            return answer.read()  # type: ignore[no-any-return]


@unittest.skipUnless(SDCTL_BIN, "SDCTL_BIN is not set")
class PasswordTest(unittest.TestCase):
    def test_wrong_password_is_an_auth_error(self) -> None:
        proc, ports, _ = start_emulator("ShellyPlus1PM,password=right", "Tasmota,password=right")
        try:
            yaml = (
                "SmartDevices:\n  PingAllowed: false\n  ResponseTimeout: 0.5\n  RetryCount: 0\n  Devices:\n"
                f"    - {{Name: Rpc, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {ports[0]}, Password: wrong}}\n"
                f"    - {{Name: Tas, Model: Tasmota, Hostname: 127.0.0.1, Port: {ports[1]}, Password: right,"
                " Outputs: [{Name: Plug}]}\n"
            )
            with Controller(yaml=yaml) as ctl:
                with self.assertRaises(smartdev.AuthError) as cm:
                    ctl.read_device("Rpc")
                self.assertEqual(cm.exception.code_name, "SD_AUTH")
                self.assertNotIn("wrong", str(cm.exception).replace("wrong password", ""))
                self.assertIs(ctl.is_device_online("Rpc"), True)
                self.assertEqual(ctl.change_output("Plug", True), (True, True))
        finally:
            proc.terminate()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


if __name__ == "__main__":
    unittest.main()
