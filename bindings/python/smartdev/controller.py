"""The :class:`Controller`: one open smartdev installation, wrapping ``sd_controller *``.

Lifecycle follows the wasmtime-py ``Managed`` pattern: the handle is owned by the object, ``close()`` is
idempotent, the object is a context manager, ``__del__`` closes a forgotten controller as a backstop, and an
``atexit`` hook closes every controller still open before the interpreter shuts down (so no library thread
calls into a finalising interpreter). Every method called after ``close()`` raises :class:`ClosedError`.

Methods may be called from several Python threads at once (ctypes releases the GIL during each C call). The
C contract forbids ``sd_close`` while another call on the same controller runs, so ``close()`` refuses new
calls and waits for the ones in flight; :meth:`Controller.wait_wake` waits in short slices so it never
delays ``close()`` by more than a quarter of a second.

asyncio: ``async for event in ctl.events():`` (:class:`EventStream`) waits on the wake descriptor with the
loop's ``add_reader``: no thread, no polling. Every other method is a plain, blocking call; from a coroutine,
run the ones that talk to devices in a thread: ``await asyncio.to_thread(ctl.change_output, "Light", True)``.
"""

from __future__ import annotations

import atexit
import ctypes
import datetime
import json
import os
import threading
import time
import warnings
import weakref
from ctypes import byref, c_bool, c_double, c_size_t, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

if TYPE_CHECKING:
    import asyncio

from . import _native
from .errors import CODE_NAMES, ClosedError, InvalidArgumentError, NotFoundError, SmartDevError, error_for_code

__all__ = [
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
]

# --- constants (include/smartdev.h) -------------------------------------------------------------------------

_SD_OK = 0
_SD_INSUFFICIENT_SIZE = 102
_SD_NO_EVENT = 104
_SD_TIMEOUT = 300

#: Log levels for ``log_level`` and the ``level`` argument of a log callback.
LOG_OFF, LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG, LOG_TRACE = 0, 1, 2, 3, 4, 5

#: Component kinds accepted by :meth:`Controller.component` and their ``SD_KIND_*`` numbers.
KINDS: Dict[str, int] = {"input": 0, "output": 1, "meter": 2, "temp_probe": 3, "cover": 4, "sensor": 5}

#: The words a cover's ``State`` can hold (``None`` when the device has not reported it).
COVER_STATES = ("open", "closed", "opening", "closing", "stopped", "calibrating")

#: The first buffer size for text and JSON results; grown to what the library asks for.
_FIRST_BUFFER = 16 * 1024

#: The buffer :meth:`Controller.get_device` passes to ``sd_get_device``: any usual device object fits, so it
#: comes with the one read (a bigger one is then fetched with ``sd_device``, without reading again).
_GET_DEVICE_BUFFER = 64 * 1024

#: Longest single ``sd_wake_wait`` slice, so ``close()`` from another thread is never held up for long.
_WAIT_SLICE_S = 0.25

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

#: ``SD_UPDATE_*`` (smartdev.h) -> the ``"Step"`` of :meth:`Controller.update_firmware`'s progress dicts.
_UPDATE_STEPS = {1: "Started", 2: "Downloading", 3: "Restarting", 4: "Back"}


# --- identities ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ByName:
    """An explicit name identity, for names that look like numbers: ``ctl.read_device(ByName("12"))``."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"ByName takes a str, not {type(self.name).__name__}")


@dataclass(frozen=True)
class ByID:
    """An explicit numeric-ID identity: ``ctl.read_device(ByID(3))`` (the same as passing ``3``)."""

    id: int

    def __post_init__(self) -> None:
        if isinstance(self.id, bool) or not isinstance(self.id, int):
            raise TypeError(f"ByID takes an int, not {type(self.id).__name__}")


#: What every ``identity`` parameter accepts: an ``int`` is an ID, a ``str`` is a name (never guessed).
Identity = Union[int, str, ByName, ByID]

#: A log callback: ``callback(level, message)`` with ``level`` one of ``LOG_ERROR`` … ``LOG_TRACE``.
LogCallback = Callable[[int, str], Any]


def _text(value: str, what: str) -> bytes:
    """UTF-8 bytes for a C string argument; a NUL character would silently cut the string, so it is refused."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise InvalidArgumentError(f"{what} contains a NUL character")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(f"{what} is not valid Unicode text: {e}") from None


def _path(value: "Union[str, os.PathLike[str]]", what: str) -> bytes:
    return _text(os.fspath(value), what)


def _identity(identity: Identity) -> Tuple[Optional[bytes], int]:
    """``(name, id)`` for the C API: a non-NULL name wins, otherwise the ID is used."""
    if isinstance(identity, ByName):
        return _text(identity.name, "name"), 0
    if isinstance(identity, ByID):
        identity = identity.id
    elif isinstance(identity, str):
        return _text(identity, "name"), 0
    if isinstance(identity, bool) or not isinstance(identity, int):
        raise TypeError(
            "identity must be an int (ID), a str (name), ByName(...) or ByID(...), "
            f"not {type(identity).__name__}"
        )
    if not _INT64_MIN <= identity <= _INT64_MAX:
        raise InvalidArgumentError(f"ID {identity} is outside the 64-bit range")
    return None, identity


# --- errors and buffers -------------------------------------------------------------------------------------


def _last_error_message() -> str:
    """``sd_last_error_message`` of the calling thread (ctypes calls run on the calling Python thread)."""
    fn = _native.lib().sd_last_error_message
    size = 1024
    for _ in range(8):
        buf = ctypes.create_string_buffer(size)
        needed = c_size_t(0)
        rc = fn(buf, size, byref(needed))
        if rc == _SD_OK:
            return buf.raw[: max(needed.value - 1, 0)].decode("utf-8", "replace")
        if rc != _SD_INSUFFICIENT_SIZE:
            break
        size = max(needed.value, size * 2)
    return ""


def _check(rc: int) -> None:
    """Raises the exception for a failed call; must run right after the call, on the same thread."""
    if rc != _SD_OK:
        raise error_for_code(rc, _last_error_message())


def _deprecated(old: str, new: str) -> None:
    """Warns (DeprecationWarning, pointing at the caller's line) that ``old`` was renamed ``new``."""
    warnings.warn(
        f"Controller.{old} is deprecated since 0.2.0: use Controller.{new} (same arguments and meaning)",
        DeprecationWarning,
        stacklevel=3,
    )


def _read_text(call: Callable[[Any, int, Any], int]) -> Optional[str]:
    """Runs ``call(buf, len, needed)`` with a growing buffer (16 KiB first). ``None`` for ``SD_NO_EVENT``."""
    size = _FIRST_BUFFER
    while True:
        buf = ctypes.create_string_buffer(size)
        needed = c_size_t(0)
        rc = call(buf, size, byref(needed))
        if rc == _SD_OK:
            return buf.raw[: needed.value - 1].decode("utf-8")
        if rc == _SD_INSUFFICIENT_SIZE and needed.value > size:
            size = needed.value  # the text may still grow before the retry; the loop asks again
            continue
        if rc == _SD_NO_EVENT:
            return None
        _check(rc)
        raise SmartDevError(f"unexpected result {rc}")  # pragma: no cover - _check raised


# --- the log callback ---------------------------------------------------------------------------------------

# Each controller hands the C library its own ctypes callback and keeps it alive until sd_close returns; the
# library calls it with that controller's records only, and never after sd_close returns (nor after a failed
# sd_open), so dropping it then is safe. At interpreter exit every open controller is closed first
# (_close_all_at_exit), so no library thread calls into Python while the interpreter finalises.

# Set while a log callback runs on the calling (usually a library) thread; see Controller.__del__.
_in_callback = threading.local()


def _log_thunk(log: LogCallback) -> Any:
    """The C callback for one controller's ``log``."""

    def forward(_user: Optional[int], level: int, message: Optional[bytes]) -> None:
        _in_callback.active = True
        try:
            log(level, (message or b"").decode("utf-8", "replace"))
        finally:
            _in_callback.active = False

    return _native.LOG_FUNC(forward)


# --- module-level functions ---------------------------------------------------------------------------------


def version() -> str:
    """The C library's version, e.g. ``"0.1.0"`` (``sd_version``)."""
    return str(_native.lib().sd_version().decode("ascii"))


def print_model_library(mode: str = "brief", model: Optional[str] = None) -> str:
    """The built-in model library listing, without opening a controller.

    Args:
        mode: ``"brief"`` or ``"detailed"``.
        model: a model id (e.g. ``"Shelly2PMG3"``) to list only that model, or ``None`` for all.
    """
    return _print_model_library(None, mode, model)


_DISCOVER_BUFFER = 64 * 1024


#: What ``energy_history`` takes as a time: an aware datetime or Unix seconds.
_TimeArg = Union[datetime.datetime, int, float]

#: First buffer for an energy history (an hour of 3-phase records fits); a bigger one is fetched again from
#: the document the library kept, without a second device read.
_HISTORY_BUFFER = 256 * 1024


def _unix(t: _TimeArg, name: str) -> int:
    """Unix seconds of a time argument; a naive datetime is refused (its zone would be a guess)."""
    if isinstance(t, datetime.datetime):
        if t.tzinfo is None or t.utcoffset() is None:
            raise InvalidArgumentError(
                f"{name} {t.isoformat()} has no time zone; give an aware datetime, e.g. datetime.now(timezone.utc)"
            )
        return int(t.timestamp())
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError(f"{name} must be a datetime or Unix seconds, not {type(t).__name__}")
    return int(t)


def discover(timeout: float = 3.0) -> List[Dict[str, Any]]:
    """Devices on the local network: listens ``timeout`` seconds for mDNS announcements on the interfaces with
    a private or link-local address, then confirms each with one HTTP request (2 s more for each 32 candidates). Needs no
    configuration; sends multicast. Each device is a dict with ``MacAddress`` (``"AA:BB:CC:DD:EE:FF"`` or
    ``None``), ``Model``, ``ReportedModel``, ``Generation``, ``Address``, ``Port``, ``Name``, ``Hostname``,
    ``Firmware``, ``AuthRequired`` and ``CertSha256`` (a device that answered over HTTPS: its certificate's
    fingerprint; ``None`` over HTTP).

    Raises:
        InvalidArgumentError: ``timeout`` is not between 0.001 and 600 seconds.
    """
    return _discover(None, timeout)


def _discover(ptr: Optional[c_void_p], timeout: float) -> List[Dict[str, Any]]:
    if not 0.001 <= timeout <= 600:
        raise InvalidArgumentError(f"timeout {timeout} s is out of range; use 0.001 to 600 seconds (3 is usual)")
    lib = _native.lib()
    buf = ctypes.create_string_buffer(_DISCOVER_BUFFER)
    needed = c_size_t(0)
    rc = lib.sd_discover(ptr, int(round(timeout * 1000)), buf, _DISCOVER_BUFFER, byref(needed))
    if rc == _SD_OK:
        text: Optional[str] = buf.raw[: needed.value - 1].decode("utf-8")
    elif rc == _SD_INSUFFICIENT_SIZE:
        # The result is kept for this thread: fetch it without searching the network again.
        text = _read_text(lambda b, n, need: lib.sd_discovered(b, n, need))
    else:
        _check(rc)
        text = None  # pragma: no cover - _check raised
    assert text is not None
    return json.loads(text)  # type: ignore[no-any-return]


def _print_model_library(ptr: Optional[c_void_p], mode: str, model: Optional[str]) -> str:
    m = _text(mode, "mode")
    one = None if model is None else _text(model, "model")
    fn = _native.lib().sd_print_model_library
    text = _read_text(lambda b, n, need: fn(ptr, m, one, b, n, need))
    assert text is not None
    return text


# --- the controller -----------------------------------------------------------------------------------------

_open_controllers: "weakref.WeakSet[Controller]" = weakref.WeakSet()


@atexit.register
def _close_all_at_exit() -> None:
    """Closes every controller still open before the interpreter finalises (so no log callback runs then)."""
    for ctl in list(_open_controllers):
        try:
            ctl.close()
        except Exception:
            pass


class Controller:
    """An open smartdev installation: configuration, one worker per device, the webhook listener.

    Exactly one of ``config_path`` and ``yaml`` must be given::

        with Controller("devices.yaml") as ctl:
            state, changed = ctl.change_output("Pump", True)

    Args:
        config_path: a YAML configuration file (either layout).
        yaml: the configuration as YAML text instead (relative paths resolve against the current directory).
        schema_path: a validation-dictionary extension file (YAML or JSON) that defines custom attributes.
        schema_yaml: the same as YAML text (both may be given; they are merged).
        models_path: a model library file used instead of the built-in one.
        wake: create the wake flag and its descriptor (:meth:`wake_fd`, :meth:`wait_wake`). Default True.
        log: ``callable(level, message)`` receiving this controller's log records, and only those, from any
            library thread (it must be thread-safe and must not call back into the controller). It is not
            called once :meth:`close` returns. Exceptions raised by it are reported by ctypes as unraisable and
            otherwise ignored.
        log_level: highest level forwarded to ``log``: ``LOG_OFF`` … ``LOG_TRACE`` (default ``LOG_INFO``).

    Raises:
        ConfigError: the configuration or schema is invalid (the message lists every problem with its key
            path); InitError: the settings cannot become an installation (e.g. a component count that does not
            match the model); SimulationError, SmartDevIOError, ModelLibraryError, LoggerError: as named;
            TypeError: not exactly one of ``config_path`` / ``yaml``; LibraryNotFoundError: no library.
    """

    def __init__(
        self,
        config_path: "Union[str, os.PathLike[str], None]" = None,
        *,
        yaml: Optional[str] = None,
        schema_path: "Union[str, os.PathLike[str], None]" = None,
        schema_yaml: Optional[str] = None,
        models_path: "Union[str, os.PathLike[str], None]" = None,
        wake: bool = True,
        log: Optional[LogCallback] = None,
        log_level: int = LOG_INFO,
    ) -> None:
        # Set first, so close()/__del__ work whatever fails below.
        self._ptr = c_void_p()
        self._cond = threading.Condition()
        self._busy = 0
        self._closing = False
        self._log_thunk: Any = None  # kept alive until sd_close returns
        self._close_listeners: Set[Callable[[], None]] = set()  # EventStreams waiting on the wake descriptor

        if (config_path is None) == (yaml is None):
            raise TypeError("Controller() takes exactly one of config_path and yaml=")
        if log is not None and not callable(log):
            raise TypeError("log must be a callable(level, message)")
        if isinstance(log_level, bool) or not isinstance(log_level, int):
            raise TypeError("log_level must be an int (LOG_OFF … LOG_TRACE)")
        source = _path(config_path, "config_path") if config_path is not None else _text(yaml, "yaml")  # type: ignore[arg-type]

        lib = _native.lib()
        opts = _native.OpenOptions()
        _check(lib.sd_open_options_init(byref(opts)))
        if schema_path is not None:
            opts.schema_path = _path(schema_path, "schema_path")
        if schema_yaml is not None:
            opts.schema_yaml = _text(schema_yaml, "schema_yaml")
        if models_path is not None:
            opts.models_path = _path(models_path, "models_path")
        opts.wake = bool(wake)
        if log is not None:
            self._log_thunk = _log_thunk(log)
            opts.log_callback = self._log_thunk
            opts.log_level = log_level

        opener = lib.sd_open if config_path is not None else lib.sd_open_yaml
        rc = opener(source, byref(opts), byref(self._ptr))
        if rc != _SD_OK:
            err = error_for_code(rc, _last_error_message())
            self._log_thunk = None  # a failed sd_open leaves no callback behind
            raise err
        _open_controllers.add(self)

    # -- lifecycle -----------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stops every library thread and frees the controller. Idempotent; waits for calls in flight on
        other threads and refuses new ones (they raise :class:`ClosedError`)."""
        cond = getattr(self, "_cond", None)
        if cond is None:  # __init__ failed before anything was allocated
            return
        with cond:
            if self._closing:
                while self._ptr.value is not None:  # another thread is closing: wait for it
                    cond.wait()
                return
            self._closing = True
            listeners = list(self._close_listeners)
            self._close_listeners.clear()
        for notify in listeners:  # every `async for ... in events()` waiting now ends
            try:
                notify()
            except Exception:
                pass
        with cond:
            while self._busy:
                cond.wait()
        try:
            if self._ptr.value is not None:
                _native.lib().sd_close(byref(self._ptr))  # sets self._ptr to NULL
        finally:
            with cond:
                self._ptr = c_void_p()
                cond.notify_all()
            self._log_thunk = None  # sd_close returned: the library no longer calls it
            _open_controllers.discard(self)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or opening failed)."""
        return self._closing or self._ptr.value is None

    def __enter__(self) -> "Controller":
        self._enter()
        self._leave()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Backstop for a controller that was never closed. The garbage collector may run this on a library
        # thread, inside a log callback; sd_close there would wait for that very thread, so hand it over.
        try:
            if getattr(_in_callback, "active", False):
                threading.Thread(target=self.close, name="smartdev-close").start()
            else:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<smartdev.Controller {'closed' if self.closed else 'open'}>"

    def _enter(self) -> c_void_p:
        with self._cond:
            if self._closing or self._ptr.value is None:
                raise ClosedError("the controller is closed")
            self._busy += 1
            return self._ptr

    def _leave(self) -> None:
        with self._cond:
            self._busy -= 1
            if self._busy == 0:
                self._cond.notify_all()

    def _call(self, name: str, *args: Any) -> None:
        """Calls ``name(ctl, *args)`` and raises on failure."""
        ptr = self._enter()
        try:
            _check(getattr(_native.lib(), name)(ptr, *args))
        finally:
            self._leave()

    def _text_call(self, name: str, *args: Any) -> Optional[str]:
        """Calls ``name(ctl, *args, buf, len, needed)`` with a growing buffer."""
        fn = getattr(_native.lib(), name)
        ptr = self._enter()
        try:
            return _read_text(lambda b, n, need: fn(ptr, *args, b, n, need))
        finally:
            self._leave()

    def _json_call(self, name: str, *args: Any) -> Any:
        text = self._text_call(name, *args)
        return None if text is None else json.loads(text)

    def _bool_call(self, name: str, identity: Identity, *args: Any) -> bool:
        out = c_bool(False)
        self._call(name, *_identity(identity), *args, byref(out))
        return bool(out.value)

    # -- listings ------------------------------------------------------------------------------------------

    def discover(self, timeout: float = 3.0) -> List[Dict[str, Any]]:
        """:func:`discover`, with each device's ``Configured`` set: ``False`` or the name of the configured
        device it is (by MAC when known, else by address and port)."""
        ptr = self._enter()
        try:
            return _discover(ptr, timeout)
        finally:
            self._leave()

    def print_model_library(self, mode: str = "brief", model: Optional[str] = None) -> str:
        """The model library listing (this controller's library, which ``models_path`` may replace).

        Args:
            mode: ``"brief"`` or ``"detailed"`` (anything else: :class:`InvalidArgumentError`).
            model: a model id (e.g. ``"Shelly2PMG3"``) to list only that model, or ``None`` for all.
        """
        ptr = self._enter()
        try:
            return _print_model_library(ptr, mode, model)
        finally:
            self._leave()

    def print_device_status(self) -> str:
        """The status listing of every device, as last read (the ``print_device_status`` text)."""
        text = self._text_call("sd_print_device_status")
        assert text is not None
        return text

    # -- objects as dicts ----------------------------------------------------------------------------------

    def read_device(self, identity: Identity) -> Dict[str, Any]:
        """Reads the device now (device I/O) and returns it as a dict with the spec's PascalCase fields (``ID``,
        ``Name``, ``Online``, ``Outputs``, ..., then custom attributes). Values a device does not report are
        ``None``.

        Raises:
            NotFoundError: no such device; DeviceTimeoutError, OfflineError, DeviceError, ...: the read failed.
                Such an error carries the device's object as last known in ``error.device`` (``"Online":
                False`` when it could not be reached, and its ``LastError``); :meth:`device` returns the same.
        """
        who = _identity(identity)
        try:
            self._call("sd_read_device", *who)
        except (NotFoundError, InvalidArgumentError, ClosedError):
            raise
        except SmartDevError as err:
            try:
                err.device = self._json_call("sd_device", *who)
            except SmartDevError:
                pass  # closed meanwhile: the read's error is what matters
            raise
        return self.device(identity)

    def get_device(self, identity: Identity) -> Dict[str, Any]:
        """The spec's ``get_device`` (C ``sd_get_device``, Rust ``get_device``, Go ``GetDevice``): reads the
        device now (device I/O) and returns its dict, like :meth:`read_device`. The device is read once per call.

        Raises:
            NotFoundError: no such device. DeviceTimeoutError (also a :class:`TimeoutError`), DeviceError,
                OfflineError, AuthError, ...: the read failed; the error carries the device's dict as it stands
                after the failure in ``error.device`` (``"Online": False`` and ``"LastError"`` when it could not
                be reached).
        """
        who = _identity(identity)
        obj: Optional[Dict[str, Any]] = None
        err: Optional[SmartDevError] = None
        ptr = self._enter()
        try:
            buf = ctypes.create_string_buffer(_GET_DEVICE_BUFFER)
            needed = c_size_t(0)
            rc = _native.lib().sd_get_device(ptr, *who, buf, _GET_DEVICE_BUFFER, byref(needed))
            if rc == _SD_OK or 300 <= rc < 400:
                # A 3xx code: the read failed and the buffer holds the object.
                if rc != _SD_OK:
                    err = error_for_code(rc, _last_error_message())
                obj = json.loads(buf.raw[: needed.value - 1].decode("utf-8"))
            elif rc == _SD_INSUFFICIENT_SIZE:
                # The device was read; the message says how it went ("the read failed (SD_<CODE>: ...)").
                message = _last_error_message()
                failed = message.find("the read failed (")
                if failed >= 0:
                    name = message[failed + len("the read failed (") :].split(":", 1)[0]
                    codes = [c for c, n in CODE_NAMES.items() if n == name and 300 <= c < 400]
                    err = error_for_code(codes[0] if codes else 302, message)
            else:
                _check(rc)
        finally:
            self._leave()
        if obj is None:
            obj = self.device(identity)  # the object just read, without another read
        if err is not None:
            err.device = obj
            raise err
        return obj

    def device(self, identity: Identity) -> Dict[str, Any]:
        """The device as a dict, as last read (no device I/O). A device that cannot be reached has one too:
        ``"Online": False`` and ``"LastError"`` saying why, with the values it reported before (``None`` for
        those never reported). ``"Address"`` is where the device is reached now: its ``Hostname``, or where it
        was found after it moved (a device configured with a ``MAC``); ``None`` while no address is known."""
        return self._json_call("sd_device", *_identity(identity))  # type: ignore[no-any-return]

    # -- firmware ------------------------------------------------------------------------------------------

    def check_firmware(self, identity: Identity) -> Dict[str, Any]:
        """Asks the device which firmware it runs and which newer versions it can install (device I/O):
        ``{"Device": "Kitchen", "Current": "1.4.4", "Stable": "1.5.0", "Beta": None, "Checked": True}``.
        Unknown is ``None``: ``Stable``/``Beta`` are ``None`` when nothing newer is on offer, and always for
        Tasmota, which cannot tell (``"Checked": False``).

        Raises: NotFoundError, UnsupportedError (a simulated device), DeviceError, DeviceTimeoutError, ...
        """
        return self._json_call("sd_check_firmware", *_identity(identity))  # type: ignore[no-any-return]

    def update_firmware(
        self,
        identity: Identity,
        channel: str = "stable",
        *,
        allow_concurrent: bool = False,
        timeout: float = 600.0,
        progress: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> Dict[str, Any]:
        """Installs the latest firmware of ``channel`` (``"stable"`` or ``"beta"``) and waits until the device
        runs it, following it through its restart (expected: not logged as a warning). Blocks for as long as
        the update takes, at most ``timeout`` seconds. Returns :meth:`check_firmware`'s dict afterwards.

        ``progress``, when given, is called for each step of the update, in order, on the calling thread,
        before this returns: ``{"Step": "Started", "From": "1.4.4", "To": "1.5.0", "Percent": None}``, possibly
        ``"Downloading"`` (again for each new ``"Percent"`` of the image, 0-100, that a Gen2+ device tells over
        its push channel), ``"Restarting"``, then ``"Back"`` (``"To"``: the version the device runs now).
        ``None`` is unknown or not part of the step. An exception it raises does not stop the update: the update runs to its end
        (without further calls), then the exception is raised here.

        Raises:
            FirmwareError: nothing newer on offer, another update running (one device at a time unless
                ``allow_concurrent``), refused by the device, not back within ``timeout``, back with the old
                version, a download the device said failed; the message says which. InvalidArgumentError: an unknown channel. NotFoundError,
                DeviceError, ...: the device could not be asked.
        """
        channels = {"stable": 0, "beta": 1}
        if channel not in channels:
            raise InvalidArgumentError(f"channel must be 'stable' or 'beta', not {channel!r}")
        who = _identity(identity)
        raised: List[BaseException] = []

        def forward(
            _user: Any, step: int, old: Optional[bytes], new: Optional[bytes], percent: int
        ) -> None:
            # An exception must not cross into C: keep the first, stop telling, raise it after the update.
            if raised or progress is None:
                return
            try:
                progress(
                    {
                        "Step": _UPDATE_STEPS.get(step, f"Step{step}"),
                        "From": None if old is None else old.decode("utf-8", "replace"),
                        "To": None if new is None else new.decode("utf-8", "replace"),
                        "Percent": percent if percent >= 0 else None,
                    }
                )
            except BaseException as e:  # re-raised after the C call
                raised.append(e)

        # Referenced until the call returns: the library calls it only before then. No progress: a NULL one.
        callback = _native.UPDATE_FUNC(forward) if progress is not None else _native.UPDATE_FUNC()
        try:
            self._call(
                "sd_update_firmware_progress",
                *who,
                channels[channel],
                bool(allow_concurrent),
                float(timeout),
                callback,
                None,
            )
        finally:
            if raised:
                raise raised[0]
        return self.check_firmware(identity)

    def energy_history(self, identity: Identity, start: _TimeArg, end: _TimeArg) -> Dict[str, Any]:
        """A meter's own interval records over ``[start, end)`` (device I/O): ``start``/``end`` are aware
        :class:`datetime.datetime` objects or Unix seconds (whole seconds are used). Returns
        ``{"Device", "Meter", "Channels", "From", "To", "Entries"}``; each entry is a record
        ``{"Kind": "Record", "Start", "Period", "Channels": [{"Energy", "ReturnedEnergy", "MinVoltage",
        "MaxVoltage", "MinCurrent", "MaxCurrent"}, ...]}`` (Wh, V, A; ``None`` where not recorded) or a gap
        ``{"Kind": "Gap", "Start", "End"}``: time the device has no record for, with no energy at all (never
        count it as 0). Times are RFC 3339 strings in UTC (``"2026-11-25T00:00:00Z"``). A 3-phase meter's
        records hold all its phases, named in ``"Channels"``.

        Raises:
            NoHistoryError: the meter keeps no history (a switch's or plug's meter, Tasmota, simulated).
            InvalidArgumentError: ``start`` is not before ``end``, or a naive datetime. NotFoundError,
            DeviceError, DeviceTimeoutError, ...: the device could not be asked.
        """
        who = _identity(identity)
        lo, hi = _unix(start, "start"), _unix(end, "end")
        lib = _native.lib()
        ptr = self._enter()
        try:
            buf = ctypes.create_string_buffer(_HISTORY_BUFFER)
            needed = c_size_t(0)
            rc = lib.sd_energy_history(ptr, *who, lo, hi, buf, _HISTORY_BUFFER, byref(needed))
            if rc == _SD_OK:
                text: Optional[str] = buf.raw[: needed.value - 1].decode("utf-8")
            elif rc == _SD_INSUFFICIENT_SIZE:
                # The document is kept for this thread: fetch it without reading the device again.
                text = _read_text(lambda b, n, need: lib.sd_energy_history_last(b, n, need))
            else:
                _check(rc)
                text = None  # pragma: no cover - _check raised
        finally:
            self._leave()
        assert text is not None
        return json.loads(text)  # type: ignore[no-any-return]

    def devices(self) -> List[Dict[str, Any]]:
        """Every device as a dict, as last read (no device I/O)."""
        return self._json_call("sd_devices")  # type: ignore[no-any-return]

    def component(self, kind: str, identity: Identity) -> Dict[str, Any]:
        """One component as a dict, as last read (no device I/O).

        Args:
            kind: ``"input"``, ``"output"``, ``"meter"``, ``"temp_probe"``, ``"cover"`` or ``"sensor"``.
            identity: the component's ID (int) or name (str), or :class:`ByName` / :class:`ByID`.
        """
        if not isinstance(kind, str):
            raise TypeError(f"kind must be a str, not {type(kind).__name__}")
        number = KINDS.get(kind)
        if number is None:
            raise InvalidArgumentError(
                f"component kind {kind!r} is unknown; use one of {', '.join(map(repr, KINDS))}"
            )
        return self._json_call("sd_component", number, *_identity(identity))  # type: ignore[no-any-return]

    def get_device_component(self, kind: str, identity: Identity) -> Dict[str, Any]:
        """The spec's ``get_device_component``: one component as a dict, as last read (no device I/O) — the same
        as :meth:`component` (C ``sd_get_device_component``, Go ``GetDeviceComponent``)."""
        return self.component(kind, identity)

    def cover(self, identity: Identity) -> Dict[str, Any]:
        """A cover as a dict, as last read (no device I/O): ``State`` (one of :data:`COVER_STATES`),
        ``Position`` (0 closed … 100 open), ``Calibrated``, ... each ``None`` until the device reports it."""
        return self.component("cover", identity)

    def covers(self) -> List[Dict[str, Any]]:
        """The covers of every device as dicts, as last read, in configuration order."""
        return [c for d in self.devices() for c in d["Covers"]]

    def sensor(self, identity: Identity) -> Dict[str, Any]:
        """A sensor as a dict, as last read (no device I/O): ``Quantity`` (``temperature``, ``humidity``,
        ``voltage``), ``Value`` (``None`` until reported), ``Unit``, ``BuiltIn``, ..."""
        return self.component("sensor", identity)

    def sensors(self) -> List[Dict[str, Any]]:
        """The sensors of every device as dicts, as last read, in configuration order."""
        return [s for d in self.devices() for s in d["Sensors"]]

    # -- switching -----------------------------------------------------------------------------------------

    def change_output(self, identity: Identity, state: bool) -> Tuple[bool, bool]:
        """Switches an output on (``True``) or off and returns ``(new_state, did_change)``: the state as the
        device reports it, and whether it actually changed."""
        if not isinstance(state, bool):
            raise TypeError(f"state must be a bool, not {type(state).__name__}")
        new, changed = c_bool(False), c_bool(False)
        self._call("sd_change_output", *_identity(identity), state, byref(new), byref(changed))
        return bool(new.value), bool(changed.value)

    def toggle_output(self, identity: Identity) -> Tuple[bool, bool]:
        """Switches an output to the opposite state; returns ``(new_state, did_change)``."""
        new, changed = c_bool(False), c_bool(False)
        self._call("sd_toggle_output", *_identity(identity), byref(new), byref(changed))
        return bool(new.value), bool(changed.value)

    def set_light(
        self,
        identity: Identity,
        *,
        on: Optional[bool] = None,
        brightness: Optional[float] = None,
        temperature: Optional[int] = None,
        rgb: Optional[Tuple[int, int, int]] = None,
        white: Optional[float] = None,
        transition: Optional[float] = None,
    ) -> Dict[str, Any]:
        """Sets a light (device I/O): only the parts given change. ``brightness`` and ``white`` in % (0–100),
        ``temperature`` in K (within the light's range), ``rgb`` as ``(red, green, blue)`` 0–255,
        ``transition`` in s. Returns the output's dict as the device reported it right after
        (``Brightness``, ``ColorTemperature``, ``Rgb``, ``White``; ``None`` what the light does not report).

        Raises: InvalidArgumentError (out of range: the message gives the range; nothing given),
        UnsupportedError (a capability the light lacks, e.g. colour on a dimmer: the message names the model),
        NotFoundError, DeviceError, DeviceTimeoutError, ...
        """
        ch = _native.LightChangeStruct()
        if on is not None:
            if not isinstance(on, bool):
                raise TypeError(f"on must be a bool, not {type(on).__name__}")
            ch.set_on, ch.on = True, on
        if brightness is not None:
            ch.set_brightness, ch.brightness = True, float(brightness)
        if temperature is not None:
            if not isinstance(temperature, int) or not 0 <= temperature < 2**32:
                raise InvalidArgumentError(f"temperature must be whole K, e.g. 3000, not {temperature!r}")
            ch.set_temperature, ch.temperature = True, temperature
        if rgb is not None:
            parts = tuple(rgb)
            if len(parts) != 3 or not all(isinstance(v, int) and 0 <= v <= 255 for v in parts):
                raise InvalidArgumentError(f"rgb must be three whole numbers 0 to 255, not {rgb!r}")
            ch.set_rgb = True
            ch.rgb[:] = parts
        if white is not None:
            ch.set_white, ch.white = True, float(white)
        if transition is not None:
            ch.set_transition, ch.transition = True, float(transition)
        return self._json_call("sd_set_light", *_identity(identity), byref(ch))  # type: ignore[no-any-return]

    # -- covers --------------------------------------------------------------------------------------------

    def _move_cover(self, name: str, identity: Identity, *args: Any) -> Dict[str, Any]:
        """Runs a cover operation and returns the cover's dict right after it, under one call guard."""
        who = _identity(identity)
        ptr = self._enter()
        try:
            _check(getattr(_native.lib(), name)(ptr, *who, *args))
            fn = _native.lib().sd_component
            text = _read_text(lambda b, n, need: fn(ptr, KINDS["cover"], *who, b, n, need))
        finally:
            self._leave()
        return json.loads(text)  # type: ignore[arg-type, no-any-return]

    def open_cover(self, identity: Identity) -> Dict[str, Any]:
        """Starts opening a cover fully (device I/O); returns its dict as reported right after the command
        (the move takes the motor's time)."""
        return self._move_cover("sd_open_cover", identity)

    def close_cover(self, identity: Identity) -> Dict[str, Any]:
        """Starts closing a cover fully (device I/O); returns its dict right after the command."""
        return self._move_cover("sd_close_cover", identity)

    def stop_cover(self, identity: Identity) -> Dict[str, Any]:
        """Stops a moving cover where it is (device I/O); returns its dict right after the command."""
        return self._move_cover("sd_stop_cover", identity)

    def set_cover_position(self, identity: Identity, position: int) -> Dict[str, Any]:
        """Sends a cover to ``position`` % (0 closed … 100 open; device I/O); returns its dict right after
        the command.

        Raises:
            InvalidArgumentError: ``position`` outside 0..100 (nothing is sent); TypeError: not an int;
            UnsupportedError: the cover is not calibrated (calibrate it in the vendor app).
        """
        if isinstance(position, bool) or not isinstance(position, int):
            raise TypeError(f"position must be an int, not {type(position).__name__}")
        if not 0 <= position <= 255:  # beyond uint8 (ctypes would wrap it); the library checks 101..255
            raise InvalidArgumentError(
                f"cover position {position} is out of range; use 0 (closed) to 100 (open)"
            )
        return self._move_cover("sd_set_cover_position", identity, position)

    # -- typed getters (no JSON, no device I/O) ------------------------------------------------------------

    def output_state(self, identity: Identity) -> bool:
        """Whether an output is on, as last read.

        Raises:
            UnknownValueError: the device has not reported it (not read yet, or no such output in its current
                profile). Unknown is never ``False``; the output's dict then has ``"State": None``.
        """
        return self._bool_call("sd_output_state", identity)

    def input_state(self, identity: Identity) -> bool:
        """Whether an input is on, as last read.

        Raises:
            UnknownValueError: the device has not reported it (not read yet, or an input in button mode).
        """
        return self._bool_call("sd_input_state", identity)

    def sensor_value(self, identity: Identity) -> float:
        """A sensor's value as last read, in its ``Unit`` (``°C``, ``%RH`` or ``V``; see :meth:`sensor`).

        Raises:
            UnknownValueError: the device has not reported it (not read yet, a sleeping device that has not
                woken up). Unknown is never 0.
        """
        out = c_double(0.0)
        self._call("sd_sensor_value", *_identity(identity), byref(out))
        return float(out.value)

    def meter(self, identity: Identity) -> Dict[str, Optional[float]]:
        """A meter's readings as last read: ``{"Power", "Voltage", "Current", "PowerFactor", "Energy",
        "ReturnedEnergy"}`` (W, V, A, -, Wh, Wh; the same keys as the meter's component dict), ``None`` for
        values the device does not report."""
        r = _native.MeterReading()
        self._call("sd_meter", *_identity(identity), byref(r))
        return {
            "Power": r.power if r.has_power else None,
            "Voltage": r.voltage if r.has_voltage else None,
            "Current": r.current if r.has_current else None,
            "PowerFactor": r.power_factor if r.has_power_factor else None,
            "Energy": r.energy if r.has_energy else None,
            "ReturnedEnergy": r.returned_energy if r.has_returned_energy else None,
        }

    def is_device_online(self, identity: Identity) -> bool:
        """Whether the device was online at its last contact (no device I/O; see :meth:`read_device_online`)."""
        return self._bool_call("sd_is_device_online", identity)

    def read_device_online(self, identity: Identity) -> bool:
        """Reads the device now (device I/O) and returns whether it answered. An unreachable device is
        ``False``, not an error; an unknown one raises :class:`NotFoundError`."""
        return self._bool_call("sd_read_device_online", identity)

    # -- names of 0.1.0, renamed in 0.2.0 (kept with their 0.1.0 meaning for at least one release) ----------

    def get_output_state(self, identity: Identity) -> bool:
        """Deprecated: the 0.1.0 name of :meth:`output_state` (last known, no device I/O)."""
        _deprecated("get_output_state", "output_state")
        return self.output_state(identity)

    def get_input_state(self, identity: Identity) -> bool:
        """Deprecated: the 0.1.0 name of :meth:`input_state` (last known, no device I/O)."""
        _deprecated("get_input_state", "input_state")
        return self.input_state(identity)

    def get_meter(self, identity: Identity) -> Dict[str, Optional[float]]:
        """Deprecated: the 0.1.0 name of :meth:`meter` (last known, no device I/O)."""
        _deprecated("get_meter", "meter")
        return self.meter(identity)

    def get_device_online(self, identity: Identity) -> bool:
        """Deprecated: the 0.1.0 name of :meth:`is_device_online` (whether the device was online at its last
        contact, no device I/O; :meth:`read_device_online` reads it now)."""
        _deprecated("get_device_online", "is_device_online")
        return self.is_device_online(identity)

    def refresh_all(self) -> None:
        """Reads every device at once.

        Raises:
            SmartDevError: the error of the first device that failed; its ``failures`` attribute is how many
                devices failed in all.
        """
        failures = c_size_t(0)
        ptr = self._enter()
        try:
            rc = _native.lib().sd_refresh_all(ptr, byref(failures))
            if rc != _SD_OK:
                err = error_for_code(rc, _last_error_message())
                err.failures = failures.value  # type: ignore[attr-defined]
                raise err
        finally:
            self._leave()

    # -- webhooks ------------------------------------------------------------------------------------------

    def pull_webhook_event(self) -> Optional[Dict[str, Any]]:
        """Takes the oldest webhook event as a dict (``Event``, ``Component``, ``ComponentID``,
        ``ObjectType``, ``Device``, ``DeviceID``, ``ReceivedAt``, ``Source``, ``Params``, ``Channel``:
        ``"webhook"``, ``"push"``, ``"mqtt"``, ``"coiot"`` (Gen1), or ``"read"`` for smartdev's own
        ``device.profile_changed``), or ``None`` when none is queued."""
        return self._json_call("sd_pull_event")  # type: ignore[no-any-return]

    def wake_fd(self) -> int:
        """A descriptor that is readable while webhook events wait (level-triggered), for ``select`` /
        ``selectors`` / asyncio's ``add_reader``. Owned by the controller: never read or close it; it is
        valid until :meth:`close`. Call :meth:`clear_wake` *before* draining :meth:`pull_webhook_event`
        until it returns ``None``, so no event is missed.

        Raises:
            InvalidArgumentError: the controller was opened with ``wake=False`` (or the platform has no
                such descriptor).
        """
        ptr = self._enter()
        try:
            fd = int(_native.lib().sd_wake_fd(ptr))
        finally:
            self._leave()
        if fd < 0:
            raise InvalidArgumentError(
                "this controller has no wake descriptor (opened with wake=False, or not supported on this platform)"
            )
        return fd

    def events(self) -> "EventStream":
        """The queued and future webhook and push events, for ``async for`` in an asyncio event loop::

            async for event in ctl.events():
                print(event["Event"], event["Component"])

        Each event is a dict as :meth:`pull_webhook_event` returns it. Waiting uses the loop's ``add_reader``
        on the wake descriptor (no thread, no polling); each event is delivered once, to one iteration.
        Cancelling the task or leaving the loop (``break``) leaves nothing behind: a later ``events()``
        iteration continues with the next event. :meth:`close` ends every iteration (``StopAsyncIteration``,
        the ``async for`` simply finishes). Needs a loop with ``add_reader`` (asyncio's default on Unix,
        uvloop).

        Raises:
            InvalidArgumentError: the controller was opened with ``wake=False``.
            ClosedError: the controller is closed already.
        """
        self.wake_fd()  # fails now, not at the first event
        return EventStream(self)

    def _dup_wake_fd(self) -> int:
        """A duplicate of the wake descriptor, owned (and closed) by the caller: the controller may close its
        own while an event loop still watches the duplicate, whose number is not reused meanwhile."""
        ptr = self._enter()
        try:
            fd = int(_native.lib().sd_wake_fd(ptr))
            if fd < 0:
                raise InvalidArgumentError("this controller has no wake descriptor (opened with wake=False)")
            return os.dup(fd)
        finally:
            self._leave()

    def _add_close_listener(self, notify: Callable[[], None]) -> bool:
        """Calls ``notify()`` (from the closing thread) when :meth:`close` starts; False if it has already."""
        with self._cond:
            if self._closing or self._ptr.value is None:
                return False
            self._close_listeners.add(notify)
            return True

    def _remove_close_listener(self, notify: Callable[[], None]) -> None:
        with self._cond:
            self._close_listeners.discard(notify)

    def clear_wake(self) -> None:
        """Clears the wake flag (and drains its descriptor). Call it before pulling events."""
        self._call("sd_wake_clear")

    def wait_wake(self, timeout: Optional[float] = None) -> bool:
        """Waits until the wake flag is set; ``True`` if it is, ``False`` when ``timeout`` seconds pass
        (``None``: wait indefinitely). Does not clear the flag.

        Raises:
            InvalidArgumentError: the controller was opened with ``wake=False``.
            ClosedError: the controller was closed, also while waiting.
        """
        deadline = None if timeout is None else time.monotonic() + max(float(timeout), 0.0)
        fn = _native.lib().sd_wake_wait
        while True:
            left = _WAIT_SLICE_S if deadline is None else min(_WAIT_SLICE_S, deadline - time.monotonic())
            ptr = self._enter()
            try:
                rc = fn(ptr, max(int(left * 1000), 0))
                if rc not in (_SD_OK, _SD_TIMEOUT):
                    _check(rc)
            finally:
                self._leave()
            if rc == _SD_OK:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def webhook_address(self) -> str:
        """Where the webhook listener listens, ``"host:port"`` (the real port even when 0 was configured).

        Raises:
            NotFoundError: the listener is not running (webhooks are not enabled in the configuration).
        """
        text = self._text_call("sd_webhook_address")
        assert text is not None
        return text


class EventStream:
    """``async for event in ctl.events():`` — the controller's events in an asyncio event loop.

    Each step clears the wake flag, then pulls one event; only when none is queued does it wait, with the
    running loop's ``add_reader`` on a duplicate of the wake descriptor, until the descriptor is readable or
    the controller closes. The reader is registered only while a step waits and removed in a ``finally``, so
    a cancelled task or a ``break`` leaves the controller as it was. Closing the controller (from any thread
    or task) ends the iteration: the waiting step raises ``StopAsyncIteration``.
    """

    def __init__(self, controller: Controller) -> None:
        self._ctl = controller
        self._ended = False

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> Dict[str, Any]:
        import asyncio

        loop = asyncio.get_running_loop()
        try:
            while not self._ended:
                self._ctl.clear_wake()  # before pulling, so an event queued meanwhile sets it again
                event = self._ctl.pull_webhook_event()
                if event is not None:
                    return event
                await self._readable(loop)
        except ClosedError:
            self._ended = True
        raise StopAsyncIteration

    async def _readable(self, loop: "asyncio.AbstractEventLoop") -> None:
        """Returns once the wake descriptor is readable or the controller is closing."""
        woken: "asyncio.Future[None]" = loop.create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        def on_close() -> None:  # on the thread calling close()
            try:
                loop.call_soon_threadsafe(wake)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                pass

        fd = self._ctl._dup_wake_fd()
        try:
            loop.add_reader(fd, wake)
            try:
                if not self._ctl._add_close_listener(on_close):
                    return  # closed meanwhile: the next step's clear_wake raises ClosedError
                try:
                    await woken
                finally:
                    self._ctl._remove_close_listener(on_close)
            finally:
                loop.remove_reader(fd)
        finally:
            os.close(fd)
