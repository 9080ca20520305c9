"""sc-smart-device's interface (``smartdev.SmartDevice`` / ``SCSmartDevice``): an application written against it
runs with only its import changed.

The application below is written from the old library's documented behaviour (the seed specification and the
behaviour reference); the old library itself is never installed. Its config is what sc-foundation's config
manager hands over: the mapping under ``SCSmartDevices`` (or ``ShellyDevices``, layout A, flat ``Webhook*`` keys).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional
from unittest import mock

import smartdev
from smartdev import SCSmartDevice, SmartDevice

# --- an application written for sc-smart-device ----------------------------------------------------------

#: A typical sc-smart-device application, verbatim apart from the import line the test swaps.
APP = '''
import threading

from sc_smart_device import SCSmartDevice


class LightingController:
    """Turns a light on and off from a wall switch's webhooks; reports devices it cannot reach."""

    def __init__(self, config, logger):
        self.logger = logger
        self.wake_event = threading.Event()
        try:
            self.smart_switch = SCSmartDevice(logger, config["SCSmartDevices"], self.wake_event)
        except RuntimeError as e:
            logger.error(f"Smart device initialisation failed: {e}")
            raise
        self.log = []

    def startup_report(self):
        library = self.smart_switch.print_model_library(mode_str="brief")
        status = self.smart_switch.print_device_status()
        return library, status

    def device_summary(self, identity):
        try:
            device = self.smart_switch.get_device(identity)
        except TimeoutError as e:
            self.log.append(("timeout", str(e)))
            return None
        except RuntimeError as e:
            self.log.append(("error", str(e)))
            return None
        return {"Model": device["Model"], "Online": device["Online"], "Hooks": device["SupportedWebhooks"]}

    def light_state(self, name):
        return self.smart_switch.get_device_component("output", name)["State"]

    def wait_and_handle(self, light, timeout):
        if not self.wake_event.wait(timeout=timeout):
            return 0
        self.wake_event.clear()
        handled = 0
        while True:
            event = self.smart_switch.pull_webhook_event()
            if not event:
                break
            handled += 1
            if event["Event"] == "input.toggle_on":
                result, did_change = self.smart_switch.change_output(light, True)
                self.log.append(("on", event["Component"], result, did_change))
            elif event["Event"] == "input.toggle_off":
                result, did_change = self.smart_switch.change_output(light, False)
                self.log.append(("off", event["Component"], result, did_change))
        return handled

    def stop(self):
        self.smart_switch.shutdown()
'''


def load_app(source: str = APP) -> Dict[str, Any]:
    """The application's module namespace, with the only change an adopter makes: the import line."""
    changed = source.replace("from sc_smart_device import SCSmartDevice", "from smartdev import SCSmartDevice")
    assert changed.count("\n") == source.count("\n") and changed != source
    namespace: Dict[str, Any] = {"__name__": "lighting_app"}
    exec(compile(changed, "lighting_app.py", "exec"), namespace)
    return namespace


# --- helpers ----------------------------------------------------------------------------------------------


def free_port() -> int:
    """A local port where nothing listens (bound, then released): connecting to it is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SilentDevice:
    """A 'device' at 127.0.0.1 that accepts connections and never answers: every request times out."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])

    def close(self) -> None:
        self.sock.close()


class Records(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: List[logging.LogRecord] = []  # emit() runs under the handler's own lock

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: Optional[int] = None) -> List[str]:
        with self.lock:  # type: ignore[union-attr]
            return [r.getMessage() for r in self.records if level is None or r.levelno == level]


def new_logger(name: str, level: int = logging.INFO) -> "tuple[logging.Logger, Records]":
    logger = logging.getLogger(f"smartdev-test.{name}.{id(object())}")
    logger.setLevel(level)
    logger.propagate = False
    handler = Records()
    logger.addHandler(handler)
    return logger, handler


def webhook(port: int, event: str, device_id: int, object_type: str, component_id: int) -> int:
    """What a Shelly device sends for a webhook sc-smart-device installed (a plain GET)."""
    url = (f"http://127.0.0.1:{port}/shelly/webhook?Event={event}&DeviceID={device_id}"
           f"&ObjectType={object_type}&ComponentID={component_id}")
    with urllib.request.urlopen(url, timeout=5) as answer:
        return int(answer.status)


def sc_settings(folder: str, *, port: int, far_port: int, silent_port: int) -> Dict[str, Any]:
    """The ``SCSmartDevices`` block of an sc-smart-device app (as its config manager returns it): custom
    attributes validated by the app's own schema, webhooks, a simulated Shelly, a simulated Tasmota, a real
    device nobody answers for (connection refused) and one that never answers (timeouts)."""
    return {
        "AllowDebugLogging": False,
        "ResponseTimeout": 0.3,
        "RetryCount": 0,
        "RetryDelay": 1,
        "PingAllowed": False,
        "SimulationFileFolder": folder,
        "ShellyWebhooks": {
            "Enabled": True,
            "Host": "127.0.0.1",
            "Port": port,
            "Path": "/shelly/webhook",
            "DefaultWebhooks": {"Inputs": ["input.toggle_on", "input.toggle_off"], "Outputs": ["switch.on"]},
        },
        "Devices": [
            {
                "Name": "Sydney Dev A",
                "Model": "Shelly2PMG3",
                "Simulate": True,
                "Inputs": [{"Name": "Sydney Dev A I1", "Webhooks": True}, {"Name": "Sydney Dev A I2"}],
                "Outputs": [
                    {"Name": "Sydney Dev A O1", "Webhooks": True, "Group": "Living Room", "Colour": "Red"},
                    {"Name": "Sydney Dev A O2"},
                ],
                "Meters": [{"Name": "Sydney Dev A M1", "MockRate": 2}, {"Name": "Sydney Dev A M2"}],
            },
            {
                "Name": "Sydney Dev B",
                "Model": "Tasmota",
                "Simulate": True,
                "Outputs": [{"Name": "Sydney Dev B O1"}],
                "Meters": [{"Name": "Sydney Dev B M1"}],
            },
            {"Name": "Shed", "Model": "ShellyPlus1PM", "Hostname": "127.0.0.1", "Port": far_port,
             "Room": "Garden"},
            {"Name": "Attic", "Model": "ShellyPlus1PM", "Hostname": "127.0.0.1", "Port": silent_port,
             "ExpectOffline": True},
        ],
    }


class CompatCase(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="smartdev-compat-")
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.silent = SilentDevice()
        self.addCleanup(self.silent.close)
        self.port = free_port()
        self.settings = sc_settings(str(self.dir / "sims"), port=self.port, far_port=free_port(),
                                    silent_port=self.silent.port)

    def smart(self, *args: Any, **kwargs: Any) -> SmartDevice:
        sd = SCSmartDevice(*args, **kwargs)
        self.addCleanup(sd.shutdown)
        return sd


# --- the tests --------------------------------------------------------------------------------------------


class SeedApplicationTest(CompatCase):
    def test_the_application_runs_with_only_its_import_changed(self) -> None:
        logger, records = new_logger("app")
        app = load_app()["LightingController"]({"SCSmartDevices": self.settings}, logger)
        try:
            library, status = app.startup_report()
            self.assertIn("Shelly2PMG3", library)
            self.assertIn("Shelly 2PM Gen3 (Shelly2PMG3), Gen3, RPC", status)
            self.assertIn("1  Sydney Dev A O1  off  (Group: Living Room, Colour: Red)", status)

            self.assertEqual(app.device_summary("Sydney Dev A")["Model"], "Shelly2PMG3")
            self.assertIs(app.device_summary(1)["Online"], True)
            self.assertIn("input.toggle_on", app.device_summary("Sydney Dev A")["Hooks"])
            # An unreachable device has an object, offline.
            self.assertEqual(app.device_summary("Shed")["Online"], False)
            # A device that never answers: the app's `except TimeoutError` runs.
            self.assertIsNone(app.device_summary("Attic"))
            self.assertEqual(app.log[-1][0], "timeout")
            self.assertIn("Attic", app.log[-1][1])
            # Not configured: the app's `except RuntimeError`.
            self.assertIsNone(app.device_summary("Nowhere"))
            self.assertEqual(app.log[-1][0], "error")

            self.assertIs(app.light_state("Sydney Dev A O1"), False)
            # The wall switch is turned on: the device calls the listener, the app wakes and switches the light.
            self.assertEqual(webhook(self.port, "input.toggle_on", 1, "input", 1), 200)
            self.assertEqual(app.wait_and_handle("Sydney Dev A O1", timeout=5), 1)
            self.assertEqual(app.log[-1], ("on", "Sydney Dev A I1", True, True))
            self.assertIs(app.light_state("Sydney Dev A O1"), True)
            self.assertEqual(webhook(self.port, "input.toggle_off", 1, "input", 1), 200)
            self.assertEqual(app.wait_and_handle("Sydney Dev A O1", timeout=5), 1)
            self.assertEqual(app.log[-1], ("off", "Sydney Dev A I1", True, True))
            self.assertEqual(app.wait_and_handle("Sydney Dev A O1", timeout=0.1), 0)  # the app cleared it
        finally:
            app.stop()
        warnings = records.messages(logging.WARNING)
        self.assertTrue(any("Shed" in m and "offline" in m for m in warnings), warnings)
        self.assertFalse(any("Attic" in m for m in warnings), "ExpectOffline devices are not warned about")

    def test_initialisation_errors_reach_the_apps_runtime_error_handler(self) -> None:
        logger, records = new_logger("init")
        self.settings["Devices"][0]["Outputs"].append({"Name": "Third"})  # the 2PM has two
        with self.assertRaises(RuntimeError) as cm:
            load_app()["LightingController"]({"SCSmartDevices": self.settings}, logger)
        self.assertIsInstance(cm.exception, smartdev.InitError)
        self.assertIn("Outputs", str(cm.exception))
        self.assertTrue(any("initialisation failed" in m for m in records.messages(logging.ERROR)))


class SmartDeviceTest(CompatCase):
    def test_identities_are_names_ids_or_objects(self) -> None:
        sd = self.smart(None, self.settings, None)
        by_name = sd.get_device("Sydney Dev A")
        self.assertEqual(sd.get_device(1)["Name"], "Sydney Dev A")
        self.assertEqual(sd.get_device(by_name)["ID"], 1)
        self.assertEqual(sd.get_device({"Name": "Sydney Dev B"})["ID"], 2)
        output = sd.get_device_component("output", "Sydney Dev B O1")
        self.assertEqual(output["ID"], 3)  # one counter per kind across devices, as sc-smart-device numbered
        self.assertEqual(sd.get_device(output)["Name"], "Sydney Dev B")  # a component stands for its device
        self.assertEqual(sd.get_device_component("output", 3)["Name"], "Sydney Dev B O1")
        self.assertEqual(sd.get_output(output)["Name"], "Sydney Dev B O1")
        self.assertEqual(sd.change_output(output, True), (True, True))
        self.assertEqual(sd.change_output(3, True), (True, False))
        self.assertEqual(sd.change_output("Sydney Dev B O1", False), (True, True))
        self.assertEqual(sd.get_meter("Sydney Dev A M1")["ID"], 1)
        self.assertEqual(sd.get_input(2)["Name"], "Sydney Dev A I2")
        self.assertEqual(sd.get_device_component("output", 1)["Group"], "Living Room")  # custom attributes
        self.assertEqual(sd.get_device("Shed")["Room"], "Garden")
        self.assertEqual(len(sd.devices), 4)
        self.assertEqual([o["ID"] for o in sd.outputs], [1, 2, 3, 4, 5])
        with self.assertRaises(RuntimeError):
            sd.get_device_component("relay", 1)
        with self.assertRaises(RuntimeError):
            sd.get_device_component("output", "Nowhere")
        with self.assertRaises(RuntimeError):
            sd.get_device({"Colour": "Red"})

    def test_an_unreachable_device_is_offline_not_an_error(self) -> None:
        sd = self.smart(None, self.settings)
        shed = sd.get_device("Shed")
        self.assertIs(shed["Online"], False)
        self.assertIn("connection refused", shed["LastError"])
        self.assertIsNone(shed["Outputs"][0]["State"])  # never reported: unknown, not off
        self.assertIs(sd.get_device_status("Shed"), False)
        self.assertIs(sd.is_device_online("Shed"), False)
        self.assertIs(sd.is_device_online("Attic"), False)  # a timeout is "not online" here
        self.assertIs(sd.is_device_online("Sydney Dev A"), True)
        self.assertIs(sd.is_device_online(), False)
        self.assertEqual(sd.change_output("Output 4", True), (False, False))  # Shed's output
        sd.refresh_all_device_statuses()  # unreachable devices do not stop the others, nor raise
        with self.assertRaises(RuntimeError):
            sd.is_device_online("Nowhere")

    def test_timeouts_are_timeout_errors_and_runtime_errors(self) -> None:
        sd = self.smart(None, self.settings)
        start = time.monotonic()
        with self.assertRaises(TimeoutError) as cm:
            sd.get_device("Attic")
        self.assertLess(time.monotonic() - start, 5)
        e = cm.exception
        self.assertIsInstance(e, RuntimeError)
        self.assertIsInstance(e, smartdev.DeviceTimeoutError)
        self.assertIn("Attic", str(e))
        self.assertIs(e.device["Online"], False)  # type: ignore[attr-defined]
        with self.assertRaises(TimeoutError):
            sd.change_output("Output 5", True)  # Attic's output

    def test_the_logger_gets_the_records_and_nothing_after_shutdown(self) -> None:
        logger, records = new_logger("log", logging.DEBUG)
        sd = SCSmartDevice(logger, self.settings)
        try:
            sd.change_output("Sydney Dev A O2", True)
            sd.get_device("Shed")
        finally:
            sd.shutdown()
        infos = records.messages(logging.INFO)
        self.assertIn("smartdev opened 4 device(s) from <string>", infos)
        self.assertTrue(any("smartdev closed" in m for m in infos), infos)
        self.assertTrue(records.messages(logging.DEBUG), "the logger is at DEBUG: debug records arrive")
        self.assertTrue(any("Shed" in m for m in records.messages(logging.WARNING)))
        count = len(records.records)
        time.sleep(0.3)
        self.assertEqual(len(records.records), count, "a record arrived after shutdown returned")
        sd.shutdown()  # idempotent
        with self.assertRaises(RuntimeError):
            sd.get_device(1)

    def test_the_logger_level_is_respected(self) -> None:
        logger, records = new_logger("warn", logging.WARNING)
        with SCSmartDevice(logger, self.settings):
            pass
        self.assertTrue(records.records)
        self.assertTrue(all(r.levelno >= logging.WARNING for r in records.records))

    def test_a_logger_that_raises_breaks_nothing(self) -> None:
        class Broken(logging.Logger):
            calls = 0

            def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
                Broken.calls += 1
                raise ValueError("the logger is broken")

        seen: List[object] = []
        old_hook = threading.excepthook
        old_unraisable = sys.unraisablehook
        sys.unraisablehook = lambda info: seen.append(info.exc_value)
        threading.excepthook = lambda args: seen.append(args.exc_value)
        try:
            sd = SCSmartDevice(Broken("broken"), self.settings)
            self.assertEqual(sd.change_output("Sydney Dev A O1", True), (True, True))
            self.assertEqual(sd.change_output("Output 4", True), (False, False))  # logs a warning itself
            sd.shutdown()
        finally:
            sys.unraisablehook = old_unraisable
            threading.excepthook = old_hook
        self.assertGreater(Broken.calls, 0)
        self.assertEqual(seen, [])

    def test_the_wake_event_is_set_for_each_webhook_and_events_can_be_filtered(self) -> None:
        wake = threading.Event()
        sd = self.smart(None, self.settings, wake)
        self.assertFalse(wake.wait(0.2))
        self.assertEqual(webhook(self.port, "switch.on", 1, "output", 1), 200)
        self.assertTrue(wake.wait(5))
        wake.clear()
        self.assertEqual(webhook(self.port, "input.toggle_on", 1, "input", 2), 200)
        self.assertTrue(wake.wait(5), "the event is set again after the app cleared it")
        wake.clear()
        self.assertEqual(webhook(self.port, "input.toggle_off", 1, "input", 1), 200)
        self.assertTrue(wake.wait(5))
        first = sd.pull_webhook_event(component_name="Sydney Dev A I1")
        assert first is not None
        self.assertEqual((first["Event"], first["Component"]), ("input.toggle_off", "Sydney Dev A I1"))
        self.assertIsNone(sd.pull_webhook_event(device_id=2))
        rest = [sd.pull_webhook_event(), sd.pull_webhook_event(), sd.pull_webhook_event()]
        self.assertEqual([e and e["Event"] for e in rest], ["switch.on", "input.toggle_on", None])
        self.assertEqual(rest[0]["Component"], "Sydney Dev A O1")  # type: ignore[index]
        self.assertEqual(rest[0]["DeviceID"], 1)  # type: ignore[index]
        sd.shutdown()
        with self.assertRaises(OSError):  # the listener is gone
            webhook(self.port, "switch.on", 1, "output", 1)

    def test_without_a_wake_event_no_listener_runs(self) -> None:
        logger, records = new_logger("nowake")
        sd = self.smart(logger, self.settings)
        with self.assertRaises(smartdev.NotFoundError):
            sd.controller.webhook_address()
        self.assertTrue(any("no wake_event" in m for m in records.messages(logging.INFO)))

    def test_layout_a_settings_with_flat_webhook_keys(self) -> None:
        legacy = {k: v for k, v in self.settings.items() if k != "ShellyWebhooks"}
        legacy.update(WebhooksEnabled=True, WebhookHost="127.0.0.1", WebhookPort=self.port,
                      WebhookPath="/shelly/webhook", DefaultWebhooks={"Inputs": ["input.toggle_on"]})
        legacy["Devices"] = legacy["Devices"][:1]  # sc_utility knew no Tasmota
        wake = threading.Event()
        sd = self.smart(None, legacy, wake)
        self.assertEqual(sd.controller.webhook_address(), f"127.0.0.1:{self.port}")
        self.assertEqual(webhook(self.port, "input.toggle_on", 1, "input", 1), 200)
        self.assertTrue(wake.wait(5))
        self.assertEqual(sd.pull_webhook_event()["Event"], "input.toggle_on")  # type: ignore[index]

    def test_a_whole_document_and_keyword_names_are_accepted(self) -> None:
        log_file = self.dir / "app.log"
        whole = {"Files": {"LogfileName": str(log_file), "LogfileVerbosity": "detailed"},
                 "Website": {"Port": 8000}, "SCSmartDevices": self.settings}
        sd = self.smart(logger=None, device_settings=whole, app_wake_event=None)
        self.assertEqual(sd.get_device(1)["Name"], "Sydney Dev A")
        self.assertFalse(log_file.exists(), "the application's Files block is the application's")
        with self.assertRaises(RuntimeError):
            SCSmartDevice(None, ["not", "a", "mapping"])  # type: ignore[arg-type]
        with self.assertRaises(RuntimeError):
            SCSmartDevice(None, {"Devices": [{"Name": "X", "Model": "NoSuchModel", "Simulate": True}]})

    def test_a_relative_simulation_folder_is_under_the_project_root_and_old_files_load(self) -> None:
        project = self.dir / "project"
        (project / "simulation_files").mkdir(parents=True)
        # A file the old library wrote: its own keys, components matched by ComponentIndex.
        old = {
            "Index": 0, "Model": "Shelly2PMG3", "Name": "Sydney Dev A", "ID": 1, "ObjectType": "device",
            "Simulate": True, "Online": False, "customkeylist": [],
            "Outputs": [
                {"ComponentIndex": 0, "ObjectType": "output", "ID": 1, "Name": "Sydney Dev A O1", "State": True,
                 "customkeylist": ["Group"], "Group": "Living Room"},
                {"ComponentIndex": 1, "ObjectType": "output", "ID": 2, "Name": "Sydney Dev A O2", "State": False},
            ],
        }
        (project / "simulation_files" / "Sydney_Dev_A.json").write_text(json.dumps(old))
        settings = dict(self.settings)
        del settings["SimulationFileFolder"]  # sc-smart-device 3.3.1: <project root>/simulation_files
        settings["Devices"] = settings["Devices"][:2]
        with mock.patch.dict(os.environ, {"SC_FOUNDATION_PROJECT_ROOT": str(project)}):
            self.assertEqual(smartdev.compat.project_root(), project.resolve())
            sd = self.smart(None, settings)
        device = sd.get_device("Sydney Dev A")
        self.assertIs(device["Online"], True)  # the old library wrote Online: false and never read it
        self.assertIs(device["Outputs"][0]["State"], True)
        self.assertTrue((project / "simulation_files" / "Sydney_Dev_B.json").exists())
        self.assertEqual(sd.change_output("Sydney Dev A O1", False), (True, True))
        saved = json.loads((project / "simulation_files" / "Sydney_Dev_A.json").read_text())
        self.assertIs(saved["Outputs"][0]["State"], False)


class ReadmeTest(unittest.TestCase):
    def test_the_readme_before_and_after_differ_only_in_the_import(self) -> None:
        readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
        section = readme[readme.index("## Moving from sc-smart-device"):]
        section = section[: section.index("\n## ", 1)]
        blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
        self.assertEqual(len(blocks), 2, "a before and an after block")
        before, after = blocks
        self.assertTrue(before.startswith("# Before\n") and after.startswith("# After\n"))
        for block in blocks:
            compile(block, "README.md", "exec")
        changed = [(b, a) for b, a in zip(before.splitlines()[1:], after.splitlines()[1:]) if a != b]
        self.assertEqual(changed, [("from sc_smart_device import SCSmartDevice", "from smartdev import SCSmartDevice")])
        self.assertEqual(len(before.splitlines()), len(after.splitlines()))


if __name__ == "__main__":
    unittest.main()
