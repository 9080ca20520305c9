"""Exceptions raised by the smartdev binding.

Every failure of a C call becomes an instance of :class:`SmartDevError` (or one of its subclasses), chosen by
the ``sd_result`` code through one table, :data:`CODE_TO_CLASS`. The message is the C library's
``sd_last_error_message`` for that call, read on the same thread right after the call failed.

Every one of them is a :class:`RuntimeError` (as sc-smart-device raised for configuration, initialisation and
device errors, so ``except RuntimeError`` in code written for it keeps working). Several classes also derive
from the built-in exception a Python programmer would reach for, so existing ``except`` clauses keep working:

* :class:`NotFoundError` is a :class:`LookupError`,
* :class:`UnknownValueError` is a :class:`LookupError` too (the value looked up is not there yet),
* :class:`DeviceTimeoutError` is a :class:`TimeoutError` (and so an :class:`OSError`),
* :class:`InvalidArgumentError` is a :class:`ValueError`,
* :class:`SmartDevIOError` is an :class:`OSError`,
* :class:`LibraryNotFoundError` is an :class:`ImportError`.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

__all__ = [
    "SmartDevError",
    "ConfigError",
    "ModelLibraryError",
    "InitError",
    "LoggerError",
    "NotFoundError",
    "DeviceTimeoutError",
    "OfflineError",
    "DeviceError",
    "UnsupportedError",
    "SimulationError",
    "WorkerFailedError",
    "AuthError",
    "UnknownValueError",
    "WrongDeviceError",
    "SleepingError",
    "FirmwareError",
    "CertificateError",
    "NoHistoryError",
    "ClosedError",
    "InvalidArgumentError",
    "PanicError",
    "SmartDevIOError",
    "IOError_",
    "LibraryNotFoundError",
    "CODE_NAMES",
    "CODE_TO_CLASS",
    "error_for_code",
]

#: Every ``sd_result`` code of ``include/smartdev.h`` and its name. Numbers never change meaning.
CODE_NAMES: Dict[int, str] = {
    0: "SD_OK",
    100: "SD_NULL_PARAMETER",
    101: "SD_INVALID_PARAMETER",
    102: "SD_INSUFFICIENT_SIZE",
    103: "SD_NOT_FOUND",
    104: "SD_NO_EVENT",
    105: "SD_CLOSED",
    106: "SD_PANIC",
    200: "SD_CONFIG",
    201: "SD_INIT",
    202: "SD_LOGGER",
    203: "SD_MODEL_LIBRARY",
    300: "SD_TIMEOUT",
    301: "SD_OFFLINE",
    302: "SD_DEVICE",
    303: "SD_UNSUPPORTED",
    304: "SD_SIMULATION",
    305: "SD_WORKER_FAILED",
    306: "SD_AUTH",
    307: "SD_UNKNOWN",
    308: "SD_WRONG_DEVICE",
    309: "SD_SLEEPING",
    310: "SD_FIRMWARE",
    311: "SD_CERTIFICATE",
    312: "SD_NO_HISTORY",
    400: "SD_IO",
}

#: What :attr:`SmartDevError.code_name` says for a number that is not a code (the library's
#: ``sd_result_name`` says the same); ``"SD_UNKNOWN"`` is the name of code 307.
UNRECOGNISED = "SD_UNRECOGNISED"


class SmartDevError(RuntimeError):
    """Base class of every smartdev error; a :class:`RuntimeError`.

    Attributes:
        message: the human-readable description (also ``str(error)``).
        code: the ``sd_result`` number (e.g. ``300``), or ``None`` for errors of the binding itself that have
            no C counterpart (:class:`LibraryNotFoundError`).
        code_name: the code's name (e.g. ``"SD_TIMEOUT"``), or ``None`` when ``code`` is ``None``.
        device: for a device that could not be read (``Controller.read_device``, ``SmartDevice.get_device``),
            its object as last known: ``"Online": False`` and its ``LastError``; ``None`` otherwise.
    """

    #: The code a subclass stands for when raised by the binding itself (overridden per instance).
    default_code: Optional[int] = None
    #: The device object that goes with a failed read (see the class docstring).
    device: Optional[Dict[str, Any]] = None

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message: str = message
        self.code: Optional[int] = code if code is not None else self.default_code
        self.code_name: Optional[str] = (
            None if self.code is None else CODE_NAMES.get(self.code, UNRECOGNISED)
        )

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class ConfigError(SmartDevError):
    """The configuration or a validation-dictionary extension could not be read or failed validation
    (``SD_CONFIG``). The message lists every problem with its full key path, e.g.
    ``SmartDevices.Devices[0].Outputs[0].Colour: unknown key``."""

    default_code = 200


class ModelLibraryError(ConfigError):
    """The model library file given as ``models_path`` could not be loaded (``SD_MODEL_LIBRARY``)."""

    default_code = 203


class InitError(SmartDevError):
    """Valid settings could not be turned into an installation: component counts that do not match the
    model, an unknown model, ... (``SD_INIT``)."""

    default_code = 201


class LoggerError(InitError):
    """The logger (a ``Files`` block of the configuration) could not be set up (``SD_LOGGER``)."""

    default_code = 202


class NotFoundError(SmartDevError, LookupError):
    """No device, component or model matches the identity (``SD_NOT_FOUND``). Also a :class:`LookupError`."""

    default_code = 103


class DeviceTimeoutError(SmartDevError, TimeoutError):
    """A device did not answer in time, after all retries (``SD_TIMEOUT``). Also a built-in
    :class:`TimeoutError`."""

    default_code = 300


class OfflineError(SmartDevError):
    """The device is marked offline and the operation was not attempted (``SD_OFFLINE``): a simulated device
    whose file says ``Online: false``. An unreachable real device raises DeviceTimeoutError or DeviceError."""

    default_code = 301


class DeviceError(SmartDevError):
    """The device could not be used (``SD_DEVICE``): the connection failed (refused, reset, cut short, host
    not found) or it answered with an error or an unusable answer (HTTP error, redirect, invalid JSON, RPC
    error)."""

    default_code = 302


class UnsupportedError(SmartDevError):
    """The operation is not possible on this device (``SD_UNSUPPORTED``)."""

    default_code = 303


class SimulationError(SmartDevError):
    """A simulation file is unreadable (``SD_SIMULATION``)."""

    default_code = 304


class WorkerFailedError(SmartDevError):
    """The device's driver panicked (a bug); the device is offline until its driver is rebuilt after a
    back-off (``SD_WORKER_FAILED``)."""

    default_code = 305


class AuthError(SmartDevError):
    """The device refused the credentials (``SD_AUTH``)."""

    default_code = 306


class UnknownValueError(SmartDevError, LookupError):
    """The value is unknown because the device has not reported it (``SD_UNKNOWN``): not read yet (a device
    that was never reached, a sleeping device that has not woken up), an input in button mode, or a
    component the device does not have in its current profile. Raised by :meth:`Controller.output_state`,
    :meth:`Controller.input_state` and :meth:`Controller.sensor_value` instead of answering ``False`` or 0:
    unknown is never false. In the dicts the value is ``None``. Also a :class:`LookupError` (catch
    :class:`NotFoundError` or this class to tell "no such component" from "no value yet")."""

    default_code = 307


class WrongDeviceError(SmartDevError):
    """Another device answers at the device's address (``SD_WRONG_DEVICE``): its MAC is not the configured
    ``MAC`` (or, with none configured, not the one the device had earlier). Nothing was switched or read from
    it; the device is offline until the right MAC answers there again. The message names both MACs and the
    address, and what to check in the configuration."""

    default_code = 308


class SleepingError(SmartDevError):
    """The device sleeps between reports (``SD_SLEEPING``): a battery device reporting through the outbound
    WebSocket takes no command until it wakes. The command was not sent; the device's object keeps its last
    report (``Sleeping``, ``LastSeen``)."""

    default_code = 309


class CertificateError(SmartDevError):
    """The device's TLS certificate was refused (``SD_CERTIFICATE``; a device reached over HTTPS): not the
    pinned one (``CertSha256``, or pinned at first use), or not valid under the configured ``CaFile``. Nothing
    was sent to it. The message names both fingerprints and how to accept a new certificate
    (``sdctl trust DEVICE``)."""

    default_code = 311


class NoHistoryError(SmartDevError):
    """The meter keeps no energy history of its own (``SD_NO_HISTORY``): a switch's or plug's meter, Tasmota,
    a simulated device. There is no history to read, rather than an empty one that would look like no energy;
    the message says what to do instead."""

    default_code = 312


class FirmwareError(SmartDevError):
    """A firmware update did not end with the device running the new version, or was not started
    (``SD_FIRMWARE``): nothing newer on offer, another update running (one device at a time unless
    ``allow_concurrent``), the device refused, it did not come back within the timeout, or it came back with the
    old version. The message says which."""

    default_code = 310


class ClosedError(SmartDevError):
    """The controller was closed (``SD_CLOSED``); raised by every method called after ``close()``."""

    default_code = 105


class InvalidArgumentError(SmartDevError, ValueError):
    """An argument is not acceptable: an unknown component kind or print mode, a string with a NUL
    character, an ID outside the 64-bit range, ... (``SD_INVALID_PARAMETER``; also ``SD_NULL_PARAMETER``,
    which only a bug in the binding could cause). Also a :class:`ValueError`."""

    default_code = 101


class PanicError(SmartDevError):
    """An internal error (a Rust panic) was caught at the API boundary (``SD_PANIC``). Please report it."""

    default_code = 106


class SmartDevIOError(SmartDevError, OSError):
    """A local I/O failure: a file, a socket, a thread (``SD_IO``). Also an :class:`OSError`."""

    default_code = 400


#: Alias of :class:`SmartDevIOError` (the name ``IOError`` itself is a built-in alias of ``OSError``).
IOError_ = SmartDevIOError


class LibraryNotFoundError(SmartDevError, ImportError):
    """The shared library ``libsmartdev`` could not be found or loaded. Also an :class:`ImportError`.
    The message says how to build it or where to point ``SMARTDEV_LIB``."""


#: The one table from ``sd_result`` code to exception class. Codes not listed map to :class:`SmartDevError`.
CODE_TO_CLASS: Dict[int, Type[SmartDevError]] = {
    100: InvalidArgumentError,
    101: InvalidArgumentError,
    103: NotFoundError,
    105: ClosedError,
    106: PanicError,
    200: ConfigError,
    201: InitError,
    202: LoggerError,
    203: ModelLibraryError,
    300: DeviceTimeoutError,
    301: OfflineError,
    302: DeviceError,
    303: UnsupportedError,
    304: SimulationError,
    305: WorkerFailedError,
    306: AuthError,
    307: UnknownValueError,
    308: WrongDeviceError,
    309: SleepingError,
    310: FirmwareError,
    311: CertificateError,
    312: NoHistoryError,
    400: SmartDevIOError,
}


def error_for_code(code: int, message: str) -> SmartDevError:
    """Builds the exception for a failed C call that returned ``code`` with ``message``."""
    cls = CODE_TO_CLASS.get(code, SmartDevError)
    return cls(message or f"{CODE_NAMES.get(code, UNRECOGNISED)} ({code})", code)
