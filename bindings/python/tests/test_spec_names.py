"""The spec's names (issue 22): ``get_device`` reads the device and, when the read fails, raises with the
device's dict in ``error.device``; ``get_device_component`` is ``component``; the names renamed in 0.2.0
still work with their 0.1.0 meaning and warn (DeprecationWarning)."""

from __future__ import annotations

import json
import socket
import warnings
from unittest import mock

import smartdev
import smartdev.controller

from .support import SimulatedCase


class GetDeviceTest(SimulatedCase):
    def test_get_device_reads_the_device(self) -> None:
        ctl = self.open()
        d = ctl.get_device("Garage")
        self.assertIs(d["Online"], True)
        self.assertIs(d["Outputs"][1]["State"], False)
        (self.dir / "Garage.json").write_text(json.dumps({"Outputs": [{"ComponentIndex": 1, "State": True}]}))
        self.assertIs(ctl.device("Garage")["Outputs"][1]["State"], False)  # last known: not read yet
        self.assertIs(ctl.get_device(1)["Outputs"][1]["State"], True)
        with self.assertRaises(smartdev.NotFoundError) as nf:
            ctl.get_device("Nowhere")
        self.assertIsNone(nf.exception.device)

    def test_get_device_of_an_unreachable_device_raises_with_its_object(self) -> None:
        with socket.socket() as s:  # a local port where nothing listens: connecting is refused
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        ctl = smartdev.Controller(yaml=(
            "SmartDevices:\n  ResponseTimeout: 0.5\n  RetryCount: 0\n  PingAllowed: false\n  RefreshInterval: 0\n"
            f"  Devices:\n    - {{Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n"))
        self.addCleanup(ctl.close)
        with self.assertRaises(smartdev.DeviceError) as cm:
            ctl.get_device("Shed")
        self.assertIn("Shed", str(cm.exception))
        device = cm.exception.device
        assert device is not None
        self.assertEqual(device["Name"], "Shed")
        self.assertIs(device["Online"], False)
        self.assertIn("connection refused", device["LastError"])
        self.assertIsNone(device["Outputs"][0]["State"])

    def test_an_object_bigger_than_the_buffer_is_read_once(self) -> None:
        # A buffer too small for any object: sd_get_device reads, answers SD_INSUFFICIENT_SIZE, and the binding
        # takes the object with sd_device and the read's outcome from the message.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        ctl = self.open(extra_devices=f"    - {{Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n")
        with mock.patch.object(smartdev.controller, "_GET_DEVICE_BUFFER", 8):
            (self.dir / "Garage.json").write_text(json.dumps({"Outputs": [{"ComponentIndex": 0, "State": True}]}))
            d = ctl.get_device("Garage")
            self.assertIs(d["Outputs"][0]["State"], True)
            with self.assertRaises(smartdev.DeviceError) as cm:
                ctl.get_device("Shed")
        device = cm.exception.device
        assert device is not None
        self.assertIs(device["Online"], False)
        self.assertIn("connection refused", device["LastError"])

    def test_get_device_component_is_component(self) -> None:
        ctl = self.open()
        ctl.change_output("Light", True)
        self.assertEqual(ctl.get_device_component("output", "Light"), ctl.component("output", "Light"))
        self.assertIs(ctl.get_device_component("output", "Light")["State"], True)
        with self.assertRaises(smartdev.NotFoundError):
            ctl.get_device_component("output", "Nowhere")

    def test_renamed_names_warn_and_keep_their_meaning(self) -> None:
        ctl = self.open()
        ctl.change_output("Light", True)
        for old, new, args in [
            ("get_output_state", "output_state", ("Light",)),
            ("get_input_state", "input_state", (1,)),
            ("get_meter", "meter", ("Fan Meter",)),
            ("get_device_online", "is_device_online", ("Garage",)),
        ]:
            with self.subTest(old=old), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.assertEqual(getattr(ctl, old)(*args), getattr(ctl, new)(*args))
                deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
                self.assertEqual(len(deprecations), 1, [str(w.message) for w in caught])
                self.assertIn(f"use Controller.{new}", str(deprecations[0].message))
                self.assertEqual(deprecations[0].filename, __file__)  # points at the caller's line
