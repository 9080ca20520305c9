"""A device that cannot be reached still has its object: ``device()`` says ``"Online": False`` with its
``"LastError"``, and a failed ``read_device()`` carries the object in ``error.device``."""

from __future__ import annotations

import socket
import unittest

import smartdev


class OfflineDeviceObjectTest(unittest.TestCase):
    """Controller: a device that cannot be reached still has its object (Online false, LastError)."""

    def test_device_and_read_device_of_an_unreachable_device(self) -> None:
        with socket.socket() as s:  # a local port where nothing listens: connecting is refused
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        ctl = smartdev.Controller(yaml=(
            "SmartDevices:\n  ResponseTimeout: 0.3\n  RetryCount: 0\n  PingAllowed: false\n  RefreshInterval: 0\n"
            f"  Devices:\n    - {{Name: Shed, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {port}}}\n"))
        self.addCleanup(ctl.close)
        d = ctl.device("Shed")
        self.assertIs(d["Online"], False)
        self.assertIn("connection refused", d["LastError"])
        self.assertEqual(d["Model"], "ShellyPlus1PM")
        self.assertIsNone(d["Outputs"][0]["State"])
        self.assertIs(ctl.devices()[0]["Online"], False)
        with self.assertRaises(smartdev.DeviceError) as cm:
            ctl.read_device(1)
        self.assertIs(cm.exception.device["Online"], False)  # type: ignore[index]
        self.assertIn("connection refused", cm.exception.device["LastError"])  # type: ignore[index]
        with self.assertRaises(smartdev.NotFoundError) as nf:
            ctl.read_device("Nowhere")
        self.assertIsNone(nf.exception.device)
