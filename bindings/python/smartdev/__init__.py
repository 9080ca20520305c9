"""smartdev: manage Shelly and Tasmota smart switches and energy meters from Python.

A ctypes binding over the smartdev C ABI (``include/smartdev.h``); standard library only, Python 3.9+.

Quick start::

    from smartdev import Controller

    with Controller("devices.yaml") as ctl:
        print(ctl.print_device_status())
        state, changed = ctl.change_output("Pump", True)
        ctl.set_cover_position("Blind", 40)

The shared library is ``SMARTDEV_LIB``, else the newer of the debug and release builds in ``CARGO_TARGET_DIR``
or the repository's ``target/`` (see :mod:`smartdev._native`); it is loaded on first use, and
:func:`library_path` says which file that was.

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
    InitError,
    InvalidArgumentError,
    IOError_,
    LibraryNotFoundError,
    LoggerError,
    ModelLibraryError,
    NotFoundError,
    OfflineError,
    PanicError,
    SimulationError,
    SmartDevError,
    SmartDevIOError,
    UnknownValueError,
    UnsupportedError,
    WorkerFailedError,
    WrongDeviceError,
    error_for_code,
)

#: The version of this binding (matches the C library's ``SMARTDEV_VERSION`` it was written for).
__version__ = "0.2.0"

# Everything the two public modules export, in one place (the explicit imports above are for readers and IDEs).
__all__ = list(controller.__all__)
__all__ += errors.__all__
__all__ += ["SmartDevice", "SCSmartDevice", "library_path"]
