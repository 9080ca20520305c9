"""Energy history against ``sdctl emulate``: a Pro 3EM's day of 1-minute records (larger than the first
buffer: fetched again from the kept document, not read twice) with a gap, datetimes with a zone, and the
errors: :class:`smartdev.NoHistoryError` for a switch's meter, :class:`smartdev.InvalidArgumentError` for an
empty range or a naive datetime.

Skipped unless ``SDCTL_BIN`` names the ``sdctl`` binary (``cargo test --test python_binding`` sets it).
"""

from __future__ import annotations

import json
import time
import unittest
from datetime import datetime, timedelta, timezone

from smartdev import Controller, InvalidArgumentError, NoHistoryError

from .test_emulator import SDCTL_BIN, post_admin, start_emulator, stop_emulator


@unittest.skipUnless(SDCTL_BIN, "SDCTL_BIN is not set")
class EnergyHistoryTest(unittest.TestCase):
    def setUp(self) -> None:
        self.proc, self.ports, self.admin = start_emulator("ShellyPro3EM", "ShellyPlus1PM")
        self.addCleanup(lambda: stop_emulator(self.proc))
        self.start = int(time.time()) // 60 * 60 - 36 * 3600
        post_admin(self.admin, "/devices/0/load?id=2&watts=-600")
        post_admin(self.admin, "/devices/0/history?backfill_s=172800")
        post_admin(self.admin, f"/devices/0/history?gap_from={self.start + 3600}&gap_to={self.start + 7200}")

    def yaml(self) -> str:
        return (
            "SmartDevices:\n"
            "  PingAllowed: false\n"
            "  RefreshInterval: 0\n"
            "  Devices:\n"
            f"    - {{Name: Grid, Model: ShellyPro3EM, Hostname: 127.0.0.1, Port: {self.ports[0]},"
            " Meters: [{Name: L1}, {Name: L2}, {Name: L3}]}\n"
            f"    - {{Name: Pump, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {self.ports[1]},"
            " Meters: [{Name: Pump Meter}]}\n"
        )

    def test_a_day_with_a_gap(self) -> None:
        with Controller(yaml=self.yaml()) as ctl:
            start = datetime.fromtimestamp(self.start, timezone(timedelta(hours=2)))
            h = ctl.energy_history("L3", start, self.start + 86400)
            self.assertGreater(len(json.dumps(h)), 256 * 1024)
            self.assertEqual((h["Device"], h["Meter"], h["Channels"]), ("Grid", "L3", ["L1", "L2", "L3"]))
            records = [e for e in h["Entries"] if e["Kind"] == "Record"]
            gaps = [e for e in h["Entries"] if e["Kind"] == "Gap"]
            self.assertEqual(len(records), 1440 - 60)
            self.assertEqual(len(gaps), 1)
            self.assertNotIn("Channels", gaps[0])
            gap_start = datetime.fromisoformat(gaps[0]["Start"].replace("Z", "+00:00"))
            self.assertEqual(gap_start.timestamp(), self.start + 3600)
            third = records[0]["Channels"][2]
            self.assertEqual((third["Energy"], third["ReturnedEnergy"]), (0.0, 10.0))  # -600 W for a minute
            self.assertAlmostEqual(records[0]["Channels"][0]["Energy"], 100 / 60, places=3)

    def test_errors(self) -> None:
        with Controller(yaml=self.yaml()) as ctl:
            with self.assertRaises(NoHistoryError) as caught:
                ctl.energy_history("Pump Meter", self.start, self.start + 60)
            self.assertEqual(caught.exception.code_name, "SD_NO_HISTORY")
            self.assertIn("keeps no history", str(caught.exception))
            with self.assertRaises(InvalidArgumentError) as empty:
                ctl.energy_history("L1", self.start, self.start)
            self.assertIn("not before", str(empty.exception))
            with self.assertRaises(InvalidArgumentError) as naive:
                ctl.energy_history("L1", datetime(2026, 1, 1), self.start)
            self.assertIn("time zone", str(naive.exception))


if __name__ == "__main__":
    unittest.main()
