"""Lights: set_light on a simulated RGBW light and a relay, ranges and capabilities refused before sending."""

from __future__ import annotations

import json

import smartdev

from .support import SimulatedCase

RGBW = "    - {Name: Strip, Model: ShellyPlusRGBWPM, Profile: rgbw, Simulate: true, Outputs: [{Name: Strip Light}]}\n"


class LightsTest(SimulatedCase):
    def test_set_light_returns_what_the_light_holds_and_the_file_keeps_it(self) -> None:
        ctl = self.open(extra_devices=RGBW)
        out = ctl.set_light("Strip Light", on=True, brightness=60, rgb=(255, 128, 0), white=20)
        self.assertEqual(
            (out["State"], out["Brightness"], out["Rgb"], out["White"], out["ColorTemperature"]),
            (True, 60.0, [255, 128, 0], 20.0, None),
        )
        doc = json.loads((self.dir / "Strip.json").read_text(encoding="utf-8"))
        self.assertEqual(doc["Outputs"][0]["Rgb"], [255, 128, 0])
        self.assertEqual(ctl.component("output", "Strip Light")["Brightness"], 60.0)

    def test_ranges_and_capabilities_are_refused_with_the_reason(self) -> None:
        ctl = self.open(extra_devices=RGBW)
        with self.assertRaisesRegex(smartdev.InvalidArgumentError, "0 to 100 %"):
            ctl.set_light("Strip Light", brightness=150)
        with self.assertRaisesRegex(smartdev.UnsupportedError, "colour temperature.*ShellyPlusRGBWPM|ShellyPlusRGBWPM.*colour temperature"):
            ctl.set_light("Strip Light", temperature=3000)
        with self.assertRaisesRegex(smartdev.UnsupportedError, "relays, not lights"):
            ctl.set_light("Fan", brightness=10)
        with self.assertRaises(smartdev.InvalidArgumentError):
            ctl.set_light("Strip Light", rgb=(256, 0, 0))
        with self.assertRaisesRegex(smartdev.InvalidArgumentError, "nothing to change"):
            ctl.set_light("Strip Light")
