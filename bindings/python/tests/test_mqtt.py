"""Devices behind a broker, from Python: a real Mosquitto (started here on a free loopback port, stopped after),
an emulated Shelly Gen2+ device and a Tasmota as its clients, and a controller reaching both with
``Channel: mqtt`` only (no host names): read, switch, and a pushed change waking the descriptor.

Skipped unless ``SDCTL_BIN`` names ``sdctl`` (``cargo test --test python_binding`` sets it) and Mosquitto is
installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request
from typing import Callable

from smartdev import Controller

from .test_emulator import SDCTL_BIN, post_admin, start_emulator, stop_emulator

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@unittest.skipUnless(SDCTL_BIN and MOSQUITTO, "SDCTL_BIN is not set or mosquitto is not installed")
class MqttTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.broker_port = free_port()
        conf = os.path.join(self.dir.name, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.broker_port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        assert MOSQUITTO is not None
        self.broker = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.stop_broker)
        deadline = time.monotonic() + 10  # a hang guard: the broker is up once it accepts
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.broker_port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.broker.poll() is not None:
                    raise RuntimeError("mosquitto did not start")
                time.sleep(0.02)
        broker = f"127.0.0.1:{self.broker_port}"
        self.emu, self.ports, self.admin = start_emulator(
            f"ShellyPlus1PM,mqtt={broker},topic=py/plus", f"Tasmota,mqtt={broker},topic=py_plug"
        )
        self.addCleanup(stop_emulator, self.emu)
        # Both devices are subscribed once the admin endpoint says so (each answers only after that).
        for i in (0, 1):
            self.wait_for(lambda: b'"connected":true' in self.get_admin(f"/devices/{i}/mqtt"))

    def stop_broker(self) -> None:
        self.broker.terminate()
        try:
            self.broker.wait(10)
        except subprocess.TimeoutExpired:
            self.broker.kill()
            self.broker.wait()

    @staticmethod
    def get(url: str) -> bytes:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.read()  # type: ignore[no-any-return]

    def get_admin(self, path: str) -> bytes:
        return self.get(f"http://127.0.0.1:{self.admin}{path}")

    @staticmethod
    def wait_for(cond: Callable[[], bool], limit: float = 10.0) -> None:
        deadline = time.monotonic() + limit  # a hang guard, not a timing assertion
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met")
            time.sleep(0.02)

    def yaml(self) -> str:
        return (
            "SmartDevices:\n"
            "  PingAllowed: false\n"
            f"  Mqtt: {{Host: 127.0.0.1, Port: {self.broker_port}, ClientId: py-test}}\n"
            "  Devices:\n"
            "    - {Name: Hall, Model: ShellyPlus1PM, Channel: mqtt, MqttTopic: py/plus, Outputs: [{Name: Lamp}]}\n"
            "    - {Name: Plug, Model: Tasmota, Channel: mqtt, MqttTopic: py_plug, Outputs: [{Name: Heater}]}\n"
        )

    def test_read_switch_and_a_pushed_change_over_the_broker(self) -> None:
        with Controller(yaml=self.yaml()) as ctl:
            for name in ("Hall", "Plug"):
                dev = ctl.read_device(name)
                self.assertIs(dev["Online"], True, name)
                self.assertEqual(dev["Transport"], "mqtt", name)
                self.assertIsNotNone(dev["MacAddress"], name)
            self.assertEqual(ctl.change_output("Lamp", True), (True, True))
            self.assertEqual(ctl.change_output("Heater", True), (True, True))
            # The device itself says so (over its HTTP, which the controller never used).
            status = json.loads(self.get(f"http://127.0.0.1:{self.ports[0]}/rpc/Switch.GetStatus?id=0"))
            self.assertIs(status["output"], True)

            # A change at the device (a local button, another client) comes as a NotifyStatus on
            # <prefix>/events/rpc: the snapshot follows without a read.
            post_admin(self.admin, "/devices/0/output?id=0&state=false")
            self.wait_for(lambda: ctl.output_state("Lamp") is False)
            # A device event comes as a NotifyEvent there: queued with Channel "mqtt", the descriptor wakes.
            fd = ctl.wake_fd()
            post_admin(self.admin, "/devices/0/fire?event=input.toggle_on&id=0")
            self.assertTrue(select.select([fd], [], [], 10)[0], "the wake descriptor stayed quiet")
            ctl.clear_wake()
            event = ctl.pull_webhook_event()
            assert event is not None
            self.assertEqual((event["Event"], event["Channel"], event["Device"]), ("input.toggle_on", "mqtt", "Hall"))


if __name__ == "__main__":
    unittest.main()
