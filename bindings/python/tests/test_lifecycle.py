"""Opening and closing: context manager, idempotent close, use after close, argument rules, discovery."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path
from unittest import mock

import smartdev
from smartdev import ClosedError, Controller, SmartDevError
from smartdev import _native
from smartdev import controller as controller_module

from .support import SCHEMA_YAML, SimulatedCase, simulated_yaml


class LifecycleTest(SimulatedCase):
    def test_context_manager_opens_and_closes(self) -> None:
        with Controller(yaml=simulated_yaml(str(self.dir)), schema_yaml=SCHEMA_YAML) as ctl:
            self.assertFalse(ctl.closed)
            self.assertEqual(ctl.read_device("Garage")["Name"], "Garage")
            self.assertIn("open", repr(ctl))
        self.assertTrue(ctl.closed)
        self.assertIn("closed", repr(ctl))

    def test_close_twice_is_harmless(self) -> None:
        ctl = self.open()
        ctl.close()
        ctl.close()
        self.assertTrue(ctl.closed)
        ctl.__exit__(None, None, None)  # a third close through the context-manager exit
        self.assertTrue(ctl.closed)

    def test_every_method_raises_closed_error_after_close(self) -> None:
        ctl = self.open(webhooks=True)
        ctl.close()
        calls = {
            "print_model_library": lambda: ctl.print_model_library(),
            "print_device_status": lambda: ctl.print_device_status(),
            "get_device": lambda: ctl.read_device("Garage"),
            "devices": lambda: ctl.devices(),
            "get_device_component": lambda: ctl.component("output", 1),
            "change_output": lambda: ctl.change_output(1, True),
            "toggle_output": lambda: ctl.toggle_output(1),
            "get_output_state": lambda: ctl.output_state(1),
            "get_input_state": lambda: ctl.input_state(1),
            "get_meter": lambda: ctl.meter(1),
            "get_device_online": lambda: ctl.is_device_online(1),
            "is_device_online": lambda: ctl.read_device_online(1),
            "refresh_all": lambda: ctl.refresh_all(),
            "pull_webhook_event": lambda: ctl.pull_webhook_event(),
            "wake_fd": lambda: ctl.wake_fd(),
            "clear_wake": lambda: ctl.clear_wake(),
            "wait_wake": lambda: ctl.wait_wake(0),
            "webhook_address": lambda: ctl.webhook_address(),
            "__enter__": lambda: ctl.__enter__(),
        }
        for name, call in calls.items():
            with self.subTest(method=name):
                with self.assertRaises(ClosedError) as cm:
                    call()
                self.assertEqual(cm.exception.code, 105)
                self.assertEqual(cm.exception.code_name, "SD_CLOSED")

    def test_exactly_one_of_config_path_and_yaml(self) -> None:
        with self.assertRaises(TypeError):
            Controller()
        with self.assertRaises(TypeError):
            Controller("a.yaml", yaml="SmartDevices: {}")

    def test_open_from_a_file_path(self) -> None:
        path = self.dir / "devices.yaml"
        path.write_text(simulated_yaml(str(self.dir)), encoding="utf-8")
        schema = self.dir / "schema.yaml"
        schema.write_text(SCHEMA_YAML, encoding="utf-8")
        for config in (str(path), path):  # str and os.PathLike
            with self.subTest(config=type(config).__name__):
                with Controller(config, schema_path=schema) as ctl:
                    self.assertEqual(ctl.read_device(1)["Outputs"][0]["Group"], "Lights")

    def test_a_forgotten_controller_is_closed_by_the_garbage_collector(self) -> None:
        ctl = Controller(yaml=simulated_yaml(str(self.dir)), schema_yaml=SCHEMA_YAML)
        ctl.read_device(1)
        del ctl
        gc.collect()
        # Opening again works (a leaked controller would still hold its threads, not a hard failure, so
        # this mainly checks __del__ runs without error).
        with Controller(yaml=simulated_yaml(str(self.dir)), schema_yaml=SCHEMA_YAML) as again:
            self.assertTrue(again.output_state("Light") in (True, False))

    def test_a_collection_inside_a_log_callback_closes_on_another_thread(self) -> None:
        # What __del__ does when the collector runs it inside a log callback on a library thread.
        ctl = Controller(yaml=simulated_yaml(str(self.dir)), schema_yaml=SCHEMA_YAML)
        closers: list = []
        real_close = ctl.close
        ctl.close = lambda: (closers.append(threading.current_thread().name), real_close())  # type: ignore[method-assign]
        controller_module._in_callback.active = True
        try:
            ctl.__del__()
        finally:
            controller_module._in_callback.active = False
        deadline = time.monotonic() + 5
        while not ctl.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(ctl.closed)
        self.assertEqual(closers, ["smartdev-close"])

    def test_close_from_another_thread_ends_an_indefinite_wait(self) -> None:
        ctl = self.open()
        outcome: list = []

        def waiter() -> None:
            try:
                outcome.append(ctl.wait_wake(None))
            except ClosedError as e:
                outcome.append(e)

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        started = time.monotonic()
        ctl.close()
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertEqual(len(outcome), 1)
        self.assertIsInstance(outcome[0], ClosedError)

    def test_concurrent_calls_then_close(self) -> None:
        ctl = self.open()
        errors: list = []

        def worker() -> None:
            try:
                for _ in range(50):
                    ctl.toggle_output("Fan")
                    ctl.meter("Light Meter")
            except ClosedError:
                pass
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        ctl.close()
        for t in threads:
            t.join(10)
        self.assertEqual(errors, [])

    def test_version(self) -> None:
        self.assertEqual(smartdev.version(), smartdev.__version__)


class DiscoveryTest(unittest.TestCase):
    def test_missing_smartdev_lib_says_what_to_do(self) -> None:
        with mock.patch.dict(os.environ, {"SMARTDEV_LIB": "/nonexistent/libsmartdev.so"}):
            with self.assertRaises(smartdev.LibraryNotFoundError) as cm:
                _native.find_library()
        message = str(cm.exception)
        self.assertIn("SMARTDEV_LIB", message)
        self.assertIn("cargo build --lib", message)
        self.assertIsInstance(cm.exception, ImportError)
        self.assertIsInstance(cm.exception, SmartDevError)

    def test_repository_target_folders_are_searched(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("SMARTDEV_LIB", "CARGO_TARGET_DIR")}
        with mock.patch.dict(os.environ, env, clear=True):
            candidates = _native._candidates()
        root = Path(__file__).resolve().parents[3]
        # The package's own library (pip install), then one group per target folder of this checkout; the
        # newer file of a group is loaded (tests/test_library.py).
        self.assertEqual(
            [[c.parent for c in group] for group in candidates],
            [[root / "bindings" / "python" / "smartdev"], [root / "target" / "debug", root / "target" / "release"]],
        )

    def test_first_use_without_a_library_fails_clearly_in_a_fresh_interpreter(self) -> None:
        env = dict(os.environ, SMARTDEV_LIB="/nonexistent/libsmartdev.so", PYTHONDONTWRITEBYTECODE="1")
        code = (
            "import smartdev\n"
            "try:\n"
            "    smartdev.version()\n"
            "except ImportError as e:\n"
            "    print(type(e).__name__, e)\n"
        )
        pkg_root = str(Path(smartdev.__file__).resolve().parents[1])
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=pkg_root, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("LibraryNotFoundError", out.stdout)
        self.assertIn("cargo build --lib", out.stdout)

    def test_the_loaded_library_is_the_one_asked_for(self) -> None:
        wanted = os.environ.get("SMARTDEV_LIB")
        if wanted:
            self.assertEqual(_native.library_path(), Path(wanted))
        else:
            self.assertTrue(_native.library_path().is_file())


if __name__ == "__main__":
    unittest.main()
