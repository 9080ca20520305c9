"""Simulated devices: objects as dicts, custom attributes, switching, typed getters, simulation-file edits."""

from __future__ import annotations

import json
import time
import unittest
from unittest import mock

import smartdev
from smartdev import ByID, ByName
from smartdev import controller as controller_module

from .support import SimulatedCase


class SimulatedDevicesTest(SimulatedCase):
    def test_get_device_fields_and_custom_attributes(self) -> None:
        ctl = self.open()
        dev = ctl.read_device("Garage")
        self.assertEqual(dev["ID"], 1)
        self.assertEqual(dev["Name"], "Garage")
        self.assertEqual(dev["ObjectType"], "device")
        self.assertEqual(dev["Model"], "Shelly2PMG3")
        self.assertEqual(dev["Generation"], 3)
        self.assertIs(dev["Simulate"], True)
        self.assertIs(dev["Online"], True)
        # A simulated device without MAC has a stable one derived from its ID, in the one spelling.
        self.assertRegex(dev["MacAddress"], r"^[0-9A-F]2(:[0-9A-F]{2}){5}$")
        self.assertEqual(dev["SimulationFile"], str(self.dir / "Garage.json"))
        self.assertEqual([o["Name"] for o in dev["Outputs"]], ["Light", "Fan"])
        self.assertEqual(dev["Outputs"][0]["Group"], "Lights")
        self.assertEqual(dev["Outputs"][1]["Group"], "Tools")
        self.assertEqual(len(dev["Inputs"]), 2)
        self.assertEqual([m["Name"] for m in dev["Meters"]], ["Light Meter", "Fan Meter"])
        self.assertEqual(ctl.read_device(1), ctl.read_device(ByName("Garage")))
        self.assertEqual(ctl.read_device(ByID(1))["Name"], "Garage")

    def test_devices_and_components(self) -> None:
        ctl = self.open()
        devices = ctl.devices()
        self.assertEqual([d["Name"] for d in devices], ["Garage"])
        out = ctl.component("output", "Fan")
        self.assertEqual((out["ID"], out["ObjectType"], out["Group"], out["State"]), (2, "output", "Tools", False))
        self.assertEqual(ctl.component("input", 1)["Name"], "Input 1")
        meter = ctl.component("meter", "Fan Meter")
        self.assertEqual((meter["ID"], meter["OutputID"]), (2, 2))
        with self.assertRaises(smartdev.NotFoundError):
            ctl.component("temp_probe", 1)  # this device has no probes

    def test_change_output_reports_the_state_and_whether_it_changed(self) -> None:
        ctl = self.open()
        self.assertEqual(ctl.change_output("Light", True), (True, True))
        self.assertEqual(ctl.change_output("Light", True), (True, False))
        self.assertEqual(ctl.change_output(1, False), (False, True))
        self.assertEqual(ctl.toggle_output("Light"), (True, True))
        self.assertEqual(ctl.toggle_output(ByID(1)), (False, True))
        self.assertIs(ctl.output_state("Light"), False)
        # The simulation file records the switching.
        doc = json.loads((self.dir / "Garage.json").read_text(encoding="utf-8"))
        self.assertIs(doc["Outputs"][0]["State"], False)

    def test_typed_getters(self) -> None:
        ctl = self.open()
        self.assertIs(ctl.output_state("Fan"), False)
        self.assertIs(ctl.input_state(2), False)
        self.assertIs(ctl.is_device_online("Garage"), True)
        self.assertIs(ctl.read_device_online(1), True)
        self.assertEqual(
            ctl.meter("Fan Meter"),
            {"Power": None, "Voltage": None, "Current": None, "PowerFactor": None, "Energy": None,
             "ReturnedEnergy": None},
        )
        # MockRate 1 Wh/s on an output that is on: power 3600 W and growing energy once refreshed.
        ctl.change_output("Light", True)
        time.sleep(0.05)
        ctl.refresh_all()
        m = ctl.meter("Light Meter")
        self.assertEqual(m["Power"], 3600.0)
        self.assertGreater(m["Energy"], 0.0)
        self.assertIsNone(m["Voltage"])
        component = ctl.component("meter", "Light Meter")
        self.assertEqual(set(m), set(m) & set(component))  # the same keys as the component dict

    def test_a_simulation_file_edit_is_seen_after_refresh_all(self) -> None:
        ctl = self.open()
        self.assertIs(ctl.output_state("Fan"), False)
        (self.dir / "Garage.json").write_text(
            '{"Outputs":[{"ComponentIndex":1,"State":true}],"Inputs":[{"ComponentIndex":0,"State":true}]}',
            encoding="utf-8",
        )
        self.assertIs(ctl.output_state("Fan"), False)  # the getters read the last known state
        ctl.refresh_all()
        self.assertIs(ctl.output_state("Fan"), True)
        self.assertIs(ctl.output_state("Light"), False)
        self.assertIs(ctl.input_state("Input 1"), True)
        self.assertIs(ctl.read_device("Garage")["Outputs"][1]["State"], True)

    def test_a_name_that_looks_like_a_number(self) -> None:
        ctl = self.open(
            extra_devices="    - {Name: '12', Model: ShellyPlus1PM, Simulate: true, Outputs: [{Name: '7'}]}\n"
        )
        self.assertEqual(ctl.read_device(ByName("12"))["ID"], 2)
        self.assertEqual(ctl.read_device("12")["ID"], 2)  # a str is always a name, never parsed
        with self.assertRaises(smartdev.NotFoundError):
            ctl.read_device(12)  # an int is always an ID
        self.assertEqual(ctl.change_output(ByName("7"), True), (True, True))
        self.assertIs(ctl.output_state(3), True)

    def test_listings(self) -> None:
        ctl = self.open()
        brief = ctl.print_model_library()
        self.assertIn("Shelly2PMG3", brief)
        self.assertIn("Shelly2PMG3", smartdev.print_model_library())
        detailed = ctl.print_model_library("detailed", "ShellyPlus2PM")
        self.assertIn("2 (switch)", detailed)
        self.assertNotIn("Shelly2PMG3", detailed)
        with self.assertRaises(smartdev.InvalidArgumentError):
            ctl.print_model_library("verbose")
        with self.assertRaises(smartdev.NotFoundError):
            smartdev.print_model_library("brief", "NoSuchModel")
        status = ctl.print_device_status()
        self.assertIn("Garage (ID: 1)", status)
        self.assertIn("Light", status)

    def test_small_buffers_grow_and_retry(self) -> None:
        ctl = self.open()
        expected = (ctl.read_device("Garage"), ctl.devices(), ctl.print_device_status(),
                    ctl.print_model_library("detailed"))
        with mock.patch.object(controller_module, "_FIRST_BUFFER", 8):
            got = (ctl.read_device("Garage"), ctl.devices(), ctl.print_device_status(),
                   ctl.print_model_library("detailed"))
            with self.assertRaises(smartdev.NotFoundError) as cm:
                ctl.read_device("A device name long enough to need a bigger message buffer " * 40)
        self.assertEqual(got, expected)
        self.assertIn("bigger message buffer", str(cm.exception))
        self.assertGreater(len(str(cm.exception)), 2000)  # the error message buffer grew too


if __name__ == "__main__":
    unittest.main()
