"""Firmware against ``sdctl emulate``: ``check_firmware`` (unknown is ``None``), ``update_firmware`` followed
through the device's restart, its ``progress`` steps, and :class:`smartdev.FirmwareError` when nothing is on
offer.

Skipped unless ``SDCTL_BIN`` names the ``sdctl`` binary (``cargo test --test python_binding`` sets it).
"""

from __future__ import annotations

import unittest

import threading
from typing import Any, Dict, List

from smartdev import Controller, FirmwareError, InvalidArgumentError

from .test_emulator import SDCTL_BIN, post_admin, start_emulator, stop_emulator


@unittest.skipUnless(SDCTL_BIN, "SDCTL_BIN is not set")
class FirmwareTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proc, self.ports, self.admin = start_emulator("ShellyPlus1PM", "Shelly1")
        self.addCleanup(self.stop)
        # The first runs 1.4.4 with 1.5.0 and 1.6.0-beta1 on offer; a short download and restart.
        self.post_admin(
            "/devices/0/firmware?version=1.4.4&stable=1.5.0&beta=1.6.0-beta1&download_ms=100&restart_ms=300"
        )
        self.post_admin("/devices/1/firmware?version=1.4.4&stable=&beta=")

    def stop(self) -> None:
        stop_emulator(self.proc)

    def post_admin(self, path: str) -> bytes:
        return post_admin(self.admin, path)

    def yaml(self) -> str:
        return (
            "SmartDevices:\n"
            "  PingAllowed: false\n"
            "  ResponseTimeout: 0.4\n"
            "  Devices:\n"
            f"    - {{Name: Kitchen, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {self.ports[0]}}}\n"
            f"    - {{Name: Hall, Model: Shelly1, Hostname: 127.0.0.1, Port: {self.ports[1]}}}\n"
        )

    def test_check_and_update(self) -> None:
        with Controller(yaml=self.yaml()) as ctl:
            info = ctl.check_firmware("Kitchen")
            self.assertEqual(
                (info["Device"], info["Current"], info["Stable"], info["Beta"], info["Checked"]),
                ("Kitchen", "1.4.4", "1.5.0", "1.6.0-beta1", True),
            )
            hall = ctl.check_firmware("Hall")
            self.assertEqual((hall["Current"], hall["Stable"], hall["Beta"]), ("1.4.4", None, None))

            after = ctl.update_firmware("Kitchen", "beta", timeout=60)
            self.assertEqual(after["Current"], "1.6.0-beta1")
            self.assertIs(ctl.device("Kitchen")["Online"], True)

            with self.assertRaises(FirmwareError) as caught:
                ctl.update_firmware("Hall")
            self.assertEqual(caught.exception.code_name, "SD_FIRMWARE")
            self.assertIn("no newer stable version", str(caught.exception))
            with self.assertRaises(InvalidArgumentError):
                ctl.update_firmware("Hall", "nightly")

    def test_progress_steps_in_order_and_a_raising_callback(self) -> None:
        # A download of 1 s: the device tells each tenth over its WebSocket, the first ones long before the
        # restart. A restart long enough that the first look after it finds the device offline even on a
        # loaded machine, so "Restarting" is always seen.
        offer = "/devices/0/firmware?version=1.4.4&stable=1.5.0&beta=&download_ms=1000&restart_ms=1500"
        self.post_admin(offer)
        caller = threading.get_ident()
        seen: List[Dict[str, Any]] = []

        def progress(step: Dict[str, Any]) -> None:
            self.assertEqual(threading.get_ident(), caller)
            seen.append(step)

        with Controller(yaml=self.yaml()) as ctl:
            after = ctl.update_firmware("Kitchen", "stable", timeout=60, progress=progress)
            self.assertEqual(after["Current"], "1.5.0")
            downloading = [s for s in seen if s["Step"] == "Downloading"]
            for s in downloading:
                self.assertEqual((s["From"], s["To"]), (None, None))
            percents = [s["Percent"] for s in downloading if s["Percent"] is not None]
            self.assertTrue(percents, f"no percent of the download was told: {seen}")
            self.assertEqual(percents, sorted(set(percents)), "each told once, rising")
            self.assertTrue(all(0 <= p <= 100 for p in percents), percents)
            self.assertEqual(
                [s for s in seen if s["Step"] != "Downloading"],
                [
                    {"Step": "Started", "From": "1.4.4", "To": "1.5.0", "Percent": None},
                    {"Step": "Restarting", "From": None, "To": None, "Percent": None},
                    {"Step": "Back", "From": None, "To": "1.5.0", "Percent": None},
                ],
            )
            # Downloading steps come between Started and Restarting.
            steps = [s["Step"] for s in seen]
            self.assertLess(steps.index("Restarting"), len(steps) - 1)
            self.assertTrue(all(s == "Downloading" for s in steps[1 : steps.index("Restarting")]), steps)

            # The callback's exception comes back after the update ran to its end, with no further calls.
            self.post_admin(offer)
            calls: List[str] = []

            def fails(step: Dict[str, Any]) -> None:
                calls.append(step["Step"])
                raise ValueError("stop")

            with self.assertRaisesRegex(ValueError, "stop"):
                ctl.update_firmware("Kitchen", progress=fails)
            self.assertEqual(calls, ["Started"])
            self.assertEqual(ctl.check_firmware("Kitchen")["Current"], "1.5.0")

            # Nothing on offer: refused before it starts, so progress is never called.
            with self.assertRaises(FirmwareError):
                ctl.update_firmware("Hall", progress=fails)
            self.assertEqual(calls, ["Started"])


if __name__ == "__main__":
    unittest.main()
