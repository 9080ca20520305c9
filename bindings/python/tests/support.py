"""Shared fixtures: simulated configurations in a temporary folder, and a schema with custom attributes."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path
from typing import Any, Optional

from smartdev import Controller

#: Adds a string attribute ``Group`` to outputs (a validation-dictionary extension).
SCHEMA_YAML = """\
SmartDevices:
  type: dict
  schema:
    Devices:
      type: list
      schema:
        type: dict
        schema:
          Outputs:
            type: list
            schema:
              type: dict
              schema:
                Group: {type: string}
"""


def simulated_yaml(folder: str, *, webhooks: bool = False, extra_devices: str = "") -> str:
    """A configuration with one simulated Shelly 2PM Gen3 named ``Garage`` (ID 1): outputs ``Light`` (ID 1,
    Group Lights) and ``Fan`` (ID 2, Group Tools), meters ``Light Meter`` (MockRate 1) and ``Fan Meter``."""
    hooks = "  ShellyWebhooks: {Enabled: true, Host: 127.0.0.1, Port: 0}\n" if webhooks else ""
    return (
        "SmartDevices:\n"
        f"  SimulationFileFolder: '{folder}'\n"
        "  RefreshInterval: 0\n"
        f"{hooks}"
        "  Devices:\n"
        "    - Name: Garage\n"
        "      Model: Shelly2PMG3\n"
        "      Simulate: true\n"
        "      Outputs: [{Name: Light, Group: Lights}, {Name: Fan, Group: Tools}]\n"
        "      Meters: [{Name: Light Meter, MockRate: 1}, {Name: Fan Meter}]\n"
        f"{extra_devices}"
    )


class SimulatedCase(unittest.TestCase):
    """A test case with a fresh simulation folder (``self.dir``) per test, removed afterwards."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="smartdev-py-")
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def open(self, **kwargs: Any) -> Controller:
        """Opens :func:`simulated_yaml` (with the schema); closed at the end of the test."""
        webhooks = kwargs.pop("webhooks", False)
        extra: Optional[str] = kwargs.pop("extra_devices", None)
        ctl = Controller(
            yaml=simulated_yaml(str(self.dir), webhooks=webhooks, extra_devices=extra or ""),
            schema_yaml=SCHEMA_YAML,
            **kwargs,
        )
        self.addCleanup(ctl.close)
        return ctl
