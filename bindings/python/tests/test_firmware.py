"""Firmware against ``sdctl emulate``: ``check_firmware`` (unknown is ``None``), ``update_firmware`` followed
through the device's restart, and :class:`smartdev.FirmwareError` when nothing is on offer.

Skipped unless ``SDCTL_BIN`` names the ``sdctl`` binary (``cargo test --test python_binding`` sets it).
"""

from __future__ import annotations

import unittest

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


if __name__ == "__main__":
    unittest.main()
