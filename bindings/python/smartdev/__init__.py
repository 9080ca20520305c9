"""smartdev: manage Shelly and Tasmota smart switches and energy meters from Python.

A ctypes binding over the smartdev C ABI (``include/smartdev.h``); standard library only, Python 3.9+.

Quick start::

    from smartdev import Controller

    with Controller("devices.yaml") as ctl:
        print(ctl.print_device_status())
        state, changed = ctl.change_output("Pump", True)
        ctl.set_cover_position("Blind", 40)

asyncio: ``async for event in ctl.events():`` waits for webhook and push events on the loop itself (no
thread); the other methods block, so run device I/O in a thread from a coroutine:
``await asyncio.to_thread(ctl.change_output, "Pump", True)``.

The shared library is ``SMARTDEV_LIB``, else the one inside this package (``pip install`` builds it), else, for
a checkout run in place only, the newer of the debug and release builds in ``CARGO_TARGET_DIR`` or the
repository's ``target/`` (see :mod:`smartdev._native`); it is loaded on first use, and :func:`library_path`
says which file that was.

Coming from sc-smart-device? :class:`SmartDevice` (also ``SCSmartDevice``) has its interface: change the import,
keep the code (see :mod:`smartdev.compat`)::

    from smartdev import SCSmartDevice
    smart = SCSmartDevice(logger, config["SCSmartDevices"], wake_event)

Identities: an ``int`` is an ID, a ``str`` is a name; ``ByName("12")`` names a device called "12".
Errors: :class:`SmartDevError` (a :class:`RuntimeError`) and its subclasses, each with ``.code`` and ``.code_name``. A state or value the
device has not reported is ``None`` in the dicts and :class:`UnknownValueError` from the typed getters, never
``False`` or 0.
"""

from . import compat, controller, errors
from ._native import library_path
from .compat import SCSmartDevice, SmartDevice
from .controller import (
    COVER_STATES,
    KINDS,
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_OFF,
    LOG_TRACE,
    LOG_WARN,
    ByID,
    ByName,
    Controller,
    EventStream,
    Identity,
    LogCallback,
    discover,
    print_model_library,
    version,
)
from .errors import (
    CODE_NAMES,
    CODE_TO_CLASS,
    AuthError,
    CertificateError,
    ClosedError,
    ConfigError,
    DeviceError,
    DeviceTimeoutError,
    FirmwareError,
    InitError,
    InvalidArgumentError,
    IOError_,
    LibraryNotFoundError,
    NoHistoryError,
    LoggerError,
    ModelLibraryError,
    NotFoundError,
    OfflineError,
    PanicError,
    SimulationError,
    SleepingError,
    SmartDevError,
    SmartDevIOError,
    UnknownValueError,
    UnsupportedError,
    WorkerFailedError,
    WrongDeviceError,
    error_for_code,
)

#: The version of this binding: the crate's (Cargo.toml), which is the wheel's version and the C library's
#: ``SMARTDEV_VERSION`` it was written for (tests/test_library.py checks both).
__version__ = "0.2.0"

# Everything the public modules export, written out so type checkers (`mypy --strict`) see each name as
# exported; tests/test_library.py (ExportsTest) checks it against the modules.
__all__ = [
    "SmartDevice",
    "SCSmartDevice",
    "library_path",
    "Controller",
    "EventStream",
    "ByName",
    "ByID",
    "Identity",
    "LogCallback",
    "KINDS",
    "COVER_STATES",
    "LOG_OFF",
    "LOG_ERROR",
    "LOG_WARN",
    "LOG_INFO",
    "LOG_DEBUG",
    "LOG_TRACE",
    "version",
    "print_model_library",
    "discover",
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
