"""Errors: the code → class table, built-in base classes, messages from the library, argument checks."""

from __future__ import annotations

import ctypes
import threading
import unittest

import smartdev
from smartdev import ByID, ByName, Controller
from smartdev import _native
from smartdev.errors import CODE_NAMES, CODE_TO_CLASS, error_for_code

from .support import SimulatedCase, simulated_yaml


class ErrorTableTest(unittest.TestCase):
    def test_code_names_match_the_library(self) -> None:
        lib = _native.lib()
        for code, name in CODE_NAMES.items():
            with self.subTest(code=code):
                self.assertEqual(lib.sd_result_name(code).decode(), name)
        self.assertEqual(lib.sd_result_name(999).decode(), "SD_UNRECOGNISED")
        self.assertEqual(error_for_code(999, "").code_name, "SD_UNRECOGNISED")  # not mistaken for code 307

    def test_each_code_maps_to_its_class(self) -> None:
        expected = {
            100: smartdev.InvalidArgumentError,
            101: smartdev.InvalidArgumentError,
            103: smartdev.NotFoundError,
            105: smartdev.ClosedError,
            106: smartdev.PanicError,
            200: smartdev.ConfigError,
            201: smartdev.InitError,
            202: smartdev.LoggerError,
            203: smartdev.ModelLibraryError,
            300: smartdev.DeviceTimeoutError,
            301: smartdev.OfflineError,
            302: smartdev.DeviceError,
            303: smartdev.UnsupportedError,
            304: smartdev.SimulationError,
            305: smartdev.WorkerFailedError,
            306: smartdev.AuthError,
            307: smartdev.UnknownValueError,
            308: smartdev.WrongDeviceError,
            309: smartdev.SleepingError,
            310: smartdev.FirmwareError,
            311: smartdev.CertificateError,
            312: smartdev.NoHistoryError,
            400: smartdev.SmartDevIOError,
        }
        self.assertEqual(CODE_TO_CLASS, expected)
        for code, cls in expected.items():
            e = error_for_code(code, "m")
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.code_name, str(e)), (code, CODE_NAMES[code], "m"))
        self.assertIs(type(error_for_code(102, "m")), smartdev.SmartDevError)
        self.assertIs(smartdev.IOError_, smartdev.SmartDevIOError)

    def test_built_in_bases(self) -> None:
        self.assertTrue(issubclass(smartdev.NotFoundError, LookupError))
        self.assertTrue(issubclass(smartdev.UnknownValueError, LookupError))
        self.assertFalse(issubclass(smartdev.UnknownValueError, smartdev.NotFoundError))
        self.assertTrue(issubclass(smartdev.DeviceTimeoutError, TimeoutError))
        # sc-smart-device raised RuntimeError for configuration, initialisation and device errors.
        self.assertTrue(issubclass(smartdev.SmartDevError, RuntimeError))
        self.assertTrue(issubclass(smartdev.DeviceTimeoutError, RuntimeError))
        self.assertTrue(issubclass(smartdev.InvalidArgumentError, ValueError))
        self.assertTrue(issubclass(smartdev.SmartDevIOError, OSError))
        self.assertTrue(issubclass(smartdev.LibraryNotFoundError, ImportError))
        for cls in set(CODE_TO_CLASS.values()):
            self.assertTrue(issubclass(cls, smartdev.SmartDevError), cls)


class LibraryErrorsTest(SimulatedCase):
    def test_not_found_is_a_lookup_error_with_the_library_message(self) -> None:
        ctl = self.open()
        with self.assertRaises(LookupError) as cm:
            ctl.read_device("Cellar")
        e = cm.exception
        self.assertIsInstance(e, smartdev.NotFoundError)
        self.assertEqual((e.code, e.code_name), (103, "SD_NOT_FOUND"))
        self.assertIn("Cellar", str(e))
        with self.assertRaises(smartdev.NotFoundError):
            ctl.change_output(99, True)
        with self.assertRaises(smartdev.NotFoundError):
            ctl.meter("Nope")
        with self.assertRaises(smartdev.NotFoundError):
            ctl.webhook_address()  # webhooks are not enabled

    def test_bad_yaml_is_a_config_error_naming_the_key_path(self) -> None:
        yaml = "SmartDevices:\n  Devices:\n    - {Model: Tasmota, Simulate: true, Outputs: [{Colour: red}]}\n"
        with self.assertRaises(smartdev.ConfigError) as cm:
            Controller(yaml=yaml)
        self.assertIn("SmartDevices.Devices[0].Outputs[0].Colour", str(cm.exception))
        self.assertEqual(cm.exception.code_name, "SD_CONFIG")
        with self.assertRaises(smartdev.ConfigError) as cm:
            Controller(yaml="SmartDevices: [")
        self.assertIn("line", str(cm.exception))
        with self.assertRaises(smartdev.ConfigError):
            Controller(yaml=simulated_yaml(str(self.dir)))  # Group needs the schema extension
        with self.assertRaises(smartdev.ConfigError):
            Controller(self.dir / "missing.yaml")

    def test_component_count_mismatch_is_an_init_error(self) -> None:
        yaml = (
            "SmartDevices:\n"
            f"  SimulationFileFolder: '{self.dir}'\n"
            "  Devices:\n"
            "    - {Name: Garage, Model: Shelly2PMG3, Simulate: true, Outputs: [{Name: a}, {Name: b}, {Name: c}]}\n"
        )
        with self.assertRaises(smartdev.InitError) as cm:
            Controller(yaml=yaml)
        self.assertIn("3 are configured", str(cm.exception))

    def test_an_unreadable_simulation_file_fails_refresh_all_with_a_count(self) -> None:
        ctl = self.open()
        (self.dir / "Garage.json").write_text("{ not json", encoding="utf-8")
        with self.assertRaises(smartdev.SimulationError) as cm:
            ctl.refresh_all()
        self.assertEqual(getattr(cm.exception, "failures"), 1)

    def test_bad_identity_types_are_type_errors(self) -> None:
        ctl = self.open()
        for bad in (True, False, 1.0, None, b"Garage", [1], {"ID": 1}):
            with self.subTest(identity=bad):
                with self.assertRaises(TypeError):
                    ctl.read_device(bad)  # type: ignore[arg-type]
                with self.assertRaises(TypeError):
                    ctl.change_output(bad, True)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            ByID(True)
        with self.assertRaises(TypeError):
            ByID("3")  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            ByName(3)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            ctl.change_output("Light", 1)  # type: ignore[arg-type]  # state must be a bool
        with self.assertRaises(TypeError):
            ctl.component(1, 1)  # type: ignore[arg-type]

    def test_bad_argument_values_are_value_errors(self) -> None:
        ctl = self.open()
        for call in (
            lambda: ctl.read_device(2**63),  # outside int64: would wrap silently in ctypes
            lambda: ctl.read_device("Gar\0age"),  # NUL would cut the name silently
            lambda: ctl.read_device("\udc80"),  # not encodable as UTF-8
            lambda: ctl.component("relay", 1),
        ):
            with self.assertRaises(ValueError) as cm:
                call()
            self.assertIsInstance(cm.exception, smartdev.InvalidArgumentError)
        with self.assertRaises(smartdev.NotFoundError):
            ctl.read_device(-(2**63))  # the lowest int64 is a valid (unknown) ID

    def test_the_message_is_read_on_the_failing_thread(self) -> None:
        ctl = self.open()
        messages = {}

        def fail(name: str) -> None:
            try:
                ctl.read_device(name)
            except smartdev.NotFoundError as e:
                messages[name] = str(e)

        threads = [threading.Thread(target=fail, args=(f"Missing{i}",)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, message in messages.items():
            self.assertIn(name, message)
        self.assertEqual(len(messages), 8)

    def test_no_pointer_is_truncated(self) -> None:
        # restype must not be the default int for functions returning pointers.
        lib = _native.lib()
        self.assertIs(lib.sd_version.restype, ctypes.c_char_p)
        self.assertIs(lib.sd_result_name.restype, ctypes.c_char_p)


if __name__ == "__main__":
    unittest.main()


class DiscoverArgumentTest(unittest.TestCase):
    """Discovery itself sends multicast (tested only in network namespaces); its refusals use no network."""

    def test_timeouts_out_of_range_are_refused(self) -> None:
        for timeout in (0, -1, 601, float("nan")):
            with self.subTest(timeout=timeout):
                with self.assertRaises(smartdev.InvalidArgumentError):
                    smartdev.discover(timeout)

    def test_the_library_refuses_them_too(self) -> None:
        lib = _native.lib()
        needed = ctypes.c_size_t(0)
        self.assertEqual(lib.sd_discover(None, 0, None, 0, ctypes.byref(needed)), 101)
