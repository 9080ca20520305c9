"""Covers, sensors and unknown values: a simulated Shelly 2PM Gen3 in cover profile, a simulated H&T Gen3 and a
device that is never reached (its states are unknown: ``None`` / UnknownValueError, never ``False``)."""

from __future__ import annotations

import socket
import tempfile
import unittest
from pathlib import Path

import smartdev
from smartdev import ByID, Controller


def _closed_port() -> int:
    """A local port where nothing listens (bound, then released), so connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def covers_yaml(folder: str) -> str:
    return (
        "SmartDevices:\n"
        f"  SimulationFileFolder: '{folder}'\n"
        "  RefreshInterval: 0\n"
        "  ResponseTimeout: 1\n"
        "  RetryCount: 0\n"
        "  Devices:\n"
        "    - {Name: Shutter, Model: Shelly2PMG3, Simulate: true, Profile: cover, Covers: [{Name: Blind}]}\n"
        "    - {Name: Bath, Model: ShellyHTG3, Simulate: true,\n"
        "       Sensors: [{Name: Bath Temperature}, {Name: Bath Humidity}]}\n"
        f"    - {{Name: Far, Model: ShellyPlus1PM, Hostname: 127.0.0.1, Port: {_closed_port()},"
        " Outputs: [{Name: Far Lamp}]}\n"
    )


class CoversCase(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="smartdev-py-covers-")
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.ctl = Controller(yaml=covers_yaml(str(self.dir)))
        self.addCleanup(self.ctl.close)


class CoverTest(CoversCase):
    def test_read_open_position_stop_close(self) -> None:
        ctl = self.ctl
        blind = ctl.cover("Blind")
        self.assertEqual(
            (blind["ID"], blind["ObjectType"], blind["State"], blind["Position"], blind["Calibrated"]),
            (1, "cover", "closed", 0.0, True),
        )
        self.assertEqual(ctl.device("Shutter")["Profile"], "cover")
        self.assertEqual(ctl.device("Shutter")["Outputs"], [])
        self.assertEqual([c["Name"] for c in ctl.covers()], ["Blind"])

        def where(c: dict) -> tuple:
            return c["State"], c["Position"]

        self.assertEqual(where(ctl.open_cover("Blind")), ("open", 100.0))
        self.assertEqual(where(ctl.set_cover_position(1, 40)), ("stopped", 40.0))
        self.assertEqual(where(ctl.stop_cover(ByID(1))), ("stopped", 40.0))
        self.assertEqual(where(ctl.close_cover("Blind")), ("closed", 0.0))
        self.assertEqual(where(ctl.cover(1)), ("closed", 0.0))  # the last known state
        self.assertIn(ctl.cover(1)["State"], smartdev.COVER_STATES)

    def test_positions_out_of_range_and_bad_arguments(self) -> None:
        ctl = self.ctl
        for bad in (101, 255, 256, -1, 10**30):
            with self.subTest(position=bad):
                with self.assertRaises(smartdev.InvalidArgumentError) as cm:
                    ctl.set_cover_position("Blind", bad)
                self.assertIn("0 (closed) to 100 (open)", str(cm.exception))
        for bad in (True, 40.0, "40", None):
            with self.subTest(position=bad):
                with self.assertRaises(TypeError):
                    ctl.set_cover_position("Blind", bad)  # type: ignore[arg-type]
        self.assertEqual(ctl.cover("Blind")["Position"], 0.0)  # nothing was sent
        with self.assertRaises(smartdev.NotFoundError):
            ctl.open_cover("Bath Humidity")  # a sensor is not a cover
        with self.assertRaises(smartdev.NotFoundError):
            ctl.cover(99)

    def test_an_uncalibrated_cover_refuses_positions(self) -> None:
        ctl = self.ctl
        (self.dir / "Shutter.json").write_text(
            '{"Covers": [{"ComponentIndex": 0, "Calibrated": false}]}', encoding="utf-8"
        )
        ctl.read_device("Shutter")
        blind = ctl.cover("Blind")
        self.assertIs(blind["Calibrated"], False)
        self.assertIsNone(blind["Position"])
        with self.assertRaises(smartdev.UnsupportedError) as cm:
            ctl.set_cover_position("Blind", 50)
        self.assertIn("not calibrated", str(cm.exception))
        opened = ctl.open_cover("Blind")
        self.assertEqual((opened["State"], opened["Position"]), ("open", None))


class SensorAndUnknownTest(CoversCase):
    def test_sensors_are_unknown_until_the_device_reports_them(self) -> None:
        ctl = self.ctl
        humidity = ctl.sensor("Bath Humidity")
        self.assertEqual(
            (humidity["Quantity"], humidity["Unit"], humidity["BuiltIn"], humidity["Value"]),
            ("humidity", "%RH", True, None),
        )
        with self.assertRaises(smartdev.UnknownValueError) as cm:
            ctl.sensor_value("Bath Temperature")
        self.assertEqual(cm.exception.code_name, "SD_UNKNOWN")
        self.assertIn("Bath Temperature", str(cm.exception))
        (self.dir / "Bath.json").write_text(
            '{"Sensors": [{"ComponentIndex": 0, "Value": 21.5}, {"ComponentIndex": 1, "Value": 48}]}',
            encoding="utf-8",
        )
        ctl.read_device("Bath")
        self.assertEqual(ctl.sensor_value("Bath Temperature"), 21.5)
        self.assertEqual(ctl.sensor_value(2), 48.0)
        self.assertEqual([s["Value"] for s in ctl.sensors()], [21.5, 48.0])
        with self.assertRaises(smartdev.NotFoundError):
            ctl.sensor_value("Blind")

    def test_a_device_never_reached_has_unknown_states_never_false(self) -> None:
        ctl = self.ctl
        self.assertIs(ctl.is_device_online("Far"), False)
        with self.assertRaises(smartdev.UnknownValueError) as cm:
            ctl.output_state("Far Lamp")
        self.assertIsInstance(cm.exception, LookupError)
        self.assertIn("Far Lamp", str(cm.exception))
        with self.assertRaises(smartdev.UnknownValueError):
            ctl.input_state(3)  # Far's input (the Shutter has inputs 1 and 2)
        self.assertIsNone(ctl.component("output", "Far Lamp")["State"])
        self.assertIsNone(ctl.device("Far")["Inputs"][0]["State"])


if __name__ == "__main__":
    unittest.main()
