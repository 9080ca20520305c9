"""HTTPS devices against ``sdctl emulate`` serving TLS: a device pinned by its fingerprint is read over TLS
and switched; a device pinned to another certificate is refused with ``CertificateError`` naming both
fingerprints and is never switched; a device with no pin is trusted at first use and kept in the trust file.

Skipped unless ``SDCTL_BIN`` names the ``sdctl`` binary (``cargo test --test python_binding`` sets it).
"""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

import smartdev
from smartdev import Controller

from .test_emulator import SDCTL_BIN, start_emulator_served, stop_emulator


@unittest.skipUnless(SDCTL_BIN, "SDCTL_BIN is not set")
class HttpsTest(unittest.TestCase):
    def test_pinned_refused_and_first_use(self) -> None:
        proc, served, _ = start_emulator_served(*["ShellyPlus1PM,tls"] * 3)
        self.addCleanup(stop_emulator, proc)
        tmp = tempfile.TemporaryDirectory(prefix="smartdev-py-tls-")
        self.addCleanup(tmp.cleanup)
        trust = Path(tmp.name) / "trust.json"
        (p0, fp0), (p1, fp1), (p2, fp2) = served
        assert fp0 and fp1 and fp2, served
        yaml = (
            "SmartDevices:\n  ResponseTimeout: 2\n  RetryCount: 0\n  PingAllowed: false\n  RefreshInterval: 0\n"
            f"  TrustFile: '{trust}'\n  Devices:\n"
            f"    - {{Name: Pinned, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {p0}, Tls: true,"
            f" CertSha256: '{fp0}'}}\n"
            f"    - {{Name: Wrong, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {p1}, Tls: true,"
            f" CertSha256: '{fp2}'}}\n"
            f"    - {{Name: FirstUse, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {p2}, Tls: true}}\n"
        )
        with Controller(yaml=yaml) as ctl:
            device = ctl.read_device("Pinned")
            self.assertIs(device["Online"], True)
            self.assertEqual(device["Transport"], "https")
            self.assertEqual(ctl.change_output(1, True), (True, True))

            with self.assertRaises(smartdev.CertificateError) as cm:
                ctl.read_device("Wrong")
            self.assertEqual(cm.exception.code_name, "SD_CERTIFICATE")
            for part in (fp1, fp2, "CertSha256"):
                self.assertIn(part, str(cm.exception))
            with self.assertRaises(smartdev.CertificateError):
                ctl.change_output(2, True)
            self.assertIs(ctl.is_device_online("Wrong"), False)

            self.assertIs(ctl.read_device("FirstUse")["Online"], True)
            text = trust.read_text()
            self.assertIn("FirstUse", text)
            self.assertIn(fp2, text)
            self.assertNotIn("Pinned", text)


if __name__ == "__main__":
    unittest.main()
