"""sc-smart-device's interface over smartdev: :class:`SmartDevice` (also ``SCSmartDevice``).

An application written for sc-smart-device (or sc_utility's ``ShellyControl`` settings) runs with only its
import changed::

    from smartdev import SCSmartDevice          # was: from sc_smart_device import SCSmartDevice

    smart = SCSmartDevice(logger, config.get("SCSmartDevices"), wake_event)
    result, did_change = smart.change_output("Pool Pump", True)

What it takes and gives:

* ``settings`` is the vendor settings block as the configuration manager hands it over (the *contents* of
  ``SCSmartDevices`` / ``SmartDevices`` / ``ShellyDevices`` / ``VendorDevices``). Flat ``Webhook*`` keys mean
  the legacy layout A, anything else layout B. Custom attributes on devices and components need no schema (the
  application's configuration manager validated them). A relative ``SimulationFileFolder`` (default
  ``simulation_files``) is taken relative to the project root as sc-foundation finds it (see
  :func:`project_root`), so existing simulation folders are used as they are.
* ``logger`` (a :class:`logging.Logger`) receives the library's records at the matching levels, at the levels
  it had enabled when the object was built; a logger that raises is ignored. No record arrives once
  :meth:`SmartDevice.shutdown` returns.
* ``wake_event`` (a :class:`threading.Event`) is set whenever an event is queued (a webhook, or an event of a
  device's push channel, which comes with the listener off too); the application clears it. Without it the
  webhook listener is not started (as sc-smart-device did).
* Errors are :class:`RuntimeError` (every :class:`smartdev.SmartDevError` is one); a device that did not
  answer in time raises :class:`smartdev.DeviceTimeoutError`, also a :class:`TimeoutError`. A device that cannot
  be reached is not an error: its object says ``"Online": False`` and ``"LastError"``.
* Objects are dicts with the same PascalCase keys; a value the device has not reported is ``None``.

The full smartdev API stays available through :attr:`SmartDevice.controller`.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Tuple, Union

from .controller import (
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_OFF,
    LOG_TRACE,
    LOG_WARN,
    ByID,
    ByName,
    Controller,
    _in_callback,
)
from .errors import (
    ClosedError,
    ConfigError,
    DeviceTimeoutError,
    InvalidArgumentError,
    NotFoundError,
    PanicError,
    SmartDevError,
)

__all__ = ["SmartDevice", "SCSmartDevice", "project_root"]

#: Root keys of the two layouts (with their aliases); a mapping holding one of them is a whole document.
_ROOT_KEYS = ("SCSmartDevices", "SmartDevices", "ShellyDevices", "VendorDevices")

#: The component lists of a device block (custom attributes may sit on each item).
_COMPONENT_LISTS = ("Inputs", "Outputs", "Meters", "TempProbes", "Covers", "Sensors")

#: Where sc-foundation looks for the project root, walking upward.
_ROOT_MARKERS = ("pyproject.toml", ".project_root", "uv.lock", ".git")

#: smartdev log level -> :mod:`logging` level (trace has no standard level: 5, below DEBUG).
_PY_LEVELS = {LOG_ERROR: logging.ERROR, LOG_WARN: logging.WARNING, LOG_INFO: logging.INFO,
              LOG_DEBUG: logging.DEBUG, LOG_TRACE: 5}

#: At most this many events are held back by filtered pulls (the oldest is dropped beyond it).
_HELD_EVENTS = 4096

#: The identities the methods accept: a name, an ID, or an object (mapping) with ``ID`` and/or ``Name``.
CompatIdentity = Union[str, int, Mapping[str, Any], ByName, ByID]


def _allow_custom_attributes() -> str:
    """A schema extension that accepts any custom attribute on devices and components: the application's
    configuration manager validated them against its own schema already (sc-smart-device validated nothing)."""
    item = {"type": "list", "schema": {"type": "dict", "allow_unknown": True}}
    device = {"type": "dict", "allow_unknown": True, "schema": {k: item for k in _COMPONENT_LISTS}}
    return json.dumps({"SCSmartDevices": {"type": "dict", "schema": {"Devices": {"type": "list", "schema": device}}}})


def project_root() -> Path:
    """The project root as sc-foundation finds it: ``SC_FOUNDATION_PROJECT_ROOT`` (or the legacy
    ``SC_UTILITY_PROJECT_ROOT``) when it names a folder; else the first folder upward from the application's
    main script holding ``pyproject.toml``, ``.project_root``, ``uv.lock`` or ``.git``; else the same search
    from the current directory; else the current directory."""
    for var in ("SC_FOUNDATION_PROJECT_ROOT", "SC_UTILITY_PROJECT_ROOT"):
        value = os.environ.get(var)
        if value and os.path.isdir(value):
            return Path(value).resolve()
    starts: List[Path] = []
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file:
        starts.append(Path(main_file).resolve().parent)
    starts.append(Path.cwd())
    for start in starts:
        for folder in (start, *start.parents):
            if any((folder / m).exists() for m in _ROOT_MARKERS):
                return folder
    return Path.cwd()


def _plain(value: Any, where: str) -> Any:
    """A JSON-ready copy of the settings: mappings become dicts, lists and tuples lists."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"{where}: key {k!r} is not a string")
            out[k] = _plain(v, f"{where}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{where}: {value!r} is not a usable number")
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ConfigError(f"{where}: a {type(value).__name__} is not a configuration value")


def _document(settings: Mapping[str, Any], webhooks_wanted: bool) -> Tuple[Dict[str, Any], str, bool]:
    """The configuration document for the settings block, its root key, and whether the settings enable
    webhooks. The block is wrapped under the root key of its layout (of a mapping that holds a root key, the whole
    file, only that block is taken); without ``webhooks_wanted`` webhooks are turned off in the document."""
    if not isinstance(settings, Mapping):
        raise ConfigError(
            f"settings must be the mapping of the vendor settings block (e.g. config['SCSmartDevices']), "
            f"not {type(settings).__name__}"
        )
    roots = [k for k in settings if k in _ROOT_KEYS]
    if roots and "Devices" not in settings:
        # The whole file: only the device settings are ours (its Files block is the application's logging).
        root = roots[0]
        doc = {root: _plain(settings[root], root)}
    else:
        flat = any(str(k).startswith("Webhook") or k == "DefaultWebhooks" for k in settings)
        root = "ShellyDevices" if flat else "SCSmartDevices"
        doc = {root: _plain(settings, root)}
    block = doc.get(root)
    hooks = _webhooks_enabled(block)
    if isinstance(block, dict):
        folder = block.get("SimulationFileFolder")
        if folder is None or isinstance(folder, str):
            path = Path(folder if folder else "simulation_files").expanduser()
            if not path.is_absolute():
                path = project_root() / path
            block["SimulationFileFolder"] = str(path)
        if not webhooks_wanted:
            # sc-smart-device ran no listener (and installed nothing) without a wake event.
            if "WebhooksEnabled" in block:
                block["WebhooksEnabled"] = False
            for key in ("ShellyWebhooks", "VendorWebhooks"):
                if isinstance(block.get(key), dict):
                    block[key]["Enabled"] = False
    return doc, root, hooks


def _webhooks_enabled(block: Any) -> bool:
    """Whether a settings block enables the webhook listener (either layout)."""
    if not isinstance(block, dict):
        return False
    if block.get("WebhooksEnabled") is True:
        return True
    return any(isinstance(block.get(k), dict) and block[k].get("Enabled") is True
               for k in ("ShellyWebhooks", "VendorWebhooks"))


def _log_level(logger: Any) -> int:
    """The most detailed smartdev level the logger has enabled now."""
    enabled = getattr(logger, "isEnabledFor", None)
    if enabled is None:
        return LOG_INFO
    for level in (LOG_TRACE, LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR):
        try:
            if enabled(_PY_LEVELS[level]):
                return level
        except Exception:
            return LOG_INFO
    return LOG_OFF


def _scalar(identity: Any) -> Any:
    if isinstance(identity, float) and identity.is_integer():
        return int(identity)
    return identity


def _component_identity(identity: CompatIdentity) -> Any:
    """A component's identity: a name, an ID, or an object (its ``ID``, else its ``Name``)."""
    if isinstance(identity, Mapping):
        ident = identity.get("ID")
        if isinstance(ident, int) and not isinstance(ident, bool):
            return ident
        name = identity.get("Name")
        if isinstance(name, str):
            return ByName(name)
        raise InvalidArgumentError("an object used as an identity needs an integer ID or a Name")
    return _scalar(identity)


def _device_identity(identity: CompatIdentity) -> Any:
    """A device's identity; a component object stands for its device (its ``DeviceID``)."""
    if isinstance(identity, Mapping):
        kind = identity.get("ObjectType")
        parent = identity.get("DeviceID")
        if kind not in (None, "device") and isinstance(parent, int) and not isinstance(parent, bool):
            return parent
    return _component_identity(identity)


def _send(logger: Any, level: int, message: str) -> None:
    """One record to the logger; whatever the logger raises is dropped (it must not break the library)."""
    if logger is None:
        return
    try:
        logger.log(level, message)
    except Exception:
        pass


def _relay_wake(ctl: Controller, event: Any) -> None:
    """Sets the application's event for every wake of the controller, until the controller is closed."""
    while True:
        try:
            if not ctl.wait_wake(1.0):
                continue
            ctl.clear_wake()  # before the event is set: a webhook arriving after this wakes us again
        except SmartDevError:
            return  # closed
        try:
            event.set()
        except Exception:
            pass


class SmartDevice:
    """sc-smart-device's control object over a smartdev :class:`Controller` (see the module docstring).

    Args:
        logger: a :class:`logging.Logger` for the library's records (or ``None``).
        settings: the vendor settings block (a mapping), either layout.
        wake_event: a :class:`threading.Event` set whenever an event is queued (or ``None``).

    Raises:
        ConfigError, InitError, ... (each a :class:`RuntimeError`): the settings are unusable.
    """

    def __init__(
        self,
        logger: Optional[logging.Logger] = None,
        settings: Optional[Mapping[str, Any]] = None,
        wake_event: Optional[threading.Event] = None,
        *,
        device_settings: Optional[Mapping[str, Any]] = None,
        app_wake_event: Optional[threading.Event] = None,
    ) -> None:
        # Set first, so shutdown()/__del__ work whatever fails below.
        self._ctl: Optional[Controller] = None
        self._relay: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._held: Deque[Dict[str, Any]] = collections.deque()
        if settings is None:
            settings = device_settings  # sc-smart-device's keyword
        if wake_event is None:
            wake_event = app_wake_event
        if settings is None:
            raise ConfigError("no settings: pass the vendor settings block (e.g. config['SCSmartDevices'])")
        if wake_event is not None and not callable(getattr(wake_event, "set", None)):
            raise TypeError("wake_event must be a threading.Event (something with set())")
        self.logger = logger
        self.wake_event = wake_event

        doc, root, hooks_in_settings = _document(settings, webhooks_wanted=wake_event is not None)
        if wake_event is None and hooks_in_settings:
            _send(logger, logging.INFO, "webhooks are enabled in the settings but no wake_event was given: "
                  "the webhook listener is not started")
        def forward(level: int, message: str) -> None:
            # A closure over the logger only: the controller must not keep this object alive.
            _send(logger, _PY_LEVELS.get(level, logging.DEBUG), message)

        log: Optional[Callable[[int, str], None]] = None if logger is None else forward
        self._ctl = Controller(
            yaml=json.dumps(doc),
            schema_yaml=_allow_custom_attributes(),
            wake=wake_event is not None,
            log=log,
            log_level=LOG_OFF if logger is None else _log_level(logger),
        )
        # Relayed with the listener off too: a device's push channel queues its input and output events.
        if wake_event is not None:
            self._relay = threading.Thread(
                target=_relay_wake, args=(self._ctl, wake_event), name="smartdev-wake", daemon=True
            )
            self._relay.start()

    # -- plumbing ------------------------------------------------------------------------------------------

    def _log(self, level: int, message: str) -> None:
        _send(self.logger, level, message)

    @property
    def controller(self) -> Controller:
        """The smartdev :class:`Controller` underneath (the full API: covers, sensors, typed getters, ...).

        Raises:
            ClosedError: after :meth:`shutdown`.
        """
        if self._ctl is None:
            raise ClosedError("the controller is closed")
        return self._ctl

    def _offline(self, err: SmartDevError, device: Optional[Dict[str, Any]]) -> bool:
        """Whether a failed device operation means "the device cannot be reached" (answered with its object)
        rather than an error to raise: not a timeout (raised, as sc-smart-device did), not a lookup or
        argument error, and the device is offline now."""
        if isinstance(err, (DeviceTimeoutError, NotFoundError, InvalidArgumentError, ClosedError, PanicError)):
            return False
        return device is not None and device.get("Online") is False

    # -- the seed's operations -----------------------------------------------------------------------------

    def print_model_library(self, mode_str: str = "brief", model_id: Optional[str] = None) -> str:
        """The model library as text: ``mode_str`` ``"brief"`` or ``"detailed"``, optionally one model."""
        return self.controller.print_model_library(mode_str, model_id)

    def print_device_status(self) -> str:
        """Every device with its components and custom attributes, as text (as last read)."""
        return self.controller.print_device_status()

    def get_device(self, identity: CompatIdentity) -> Dict[str, Any]:
        """Reads the device now and returns its object (``Model``, ``Online``, ``SupportedWebhooks``, status
        values, components, custom attributes).

        A device that cannot be reached (connection refused, host unreachable, offline) is not an error: its
        object is returned with ``"Online": False`` and ``"LastError"``.

        Raises:
            DeviceTimeoutError: (a :class:`TimeoutError`) the device did not answer in time after all retries;
                ``error.device`` is its object. NotFoundError: no such device. Other :class:`RuntimeError`
                subclasses: the device answered but could not be used (e.g. :class:`smartdev.AuthError`).
        """
        try:
            return self.controller.read_device(_device_identity(identity))
        except SmartDevError as err:
            if self._offline(err, err.device):
                return err.device  # type: ignore[return-value]
            raise

    def get_device_status(self, identity: CompatIdentity) -> bool:
        """Reads the device now; whether it is online (errors as for :meth:`get_device`)."""
        return self.get_device(identity).get("Online") is True

    def get_device_information(self, identity: CompatIdentity, refresh_status: bool = False) -> Dict[str, Any]:
        """The device's object with its component lists; read now when ``refresh_status`` is true."""
        if refresh_status:
            return self.get_device(identity)
        return self.controller.device(_device_identity(identity))

    def get_device_component(self, component_type: str, identity: CompatIdentity) -> Dict[str, Any]:
        """One component's object as last read: ``component_type`` ``"input"``, ``"output"``, ``"meter"``,
        ``"temp_probe"`` (also ``"cover"``, ``"sensor"``); an output's ``State`` is True when on (``None``
        while its device has not reported it)."""
        return self.controller.component(component_type, _component_identity(identity))

    def get_output(self, identity: CompatIdentity) -> Dict[str, Any]:
        """The output's object as last read."""
        return self.get_device_component("output", identity)

    def get_input(self, identity: CompatIdentity) -> Dict[str, Any]:
        """The input's object as last read."""
        return self.get_device_component("input", identity)

    def get_meter(self, identity: CompatIdentity) -> Dict[str, Any]:
        """The meter's object as last read."""
        return self.get_device_component("meter", identity)

    def get_temp_probe(self, identity: CompatIdentity) -> Dict[str, Any]:
        """The temperature probe's object as last read."""
        return self.get_device_component("temp_probe", identity)

    def change_output(self, identity: CompatIdentity, desired_state: bool) -> Tuple[bool, bool]:
        """Switches an output on or off: ``(result, did_change)``, ``result`` True on success.

        A device that cannot be reached gives ``(False, False)`` and a warning (unless it is ``ExpectOffline``).

        Raises:
            DeviceTimeoutError: (a :class:`TimeoutError`) the device did not answer in time after all retries.
            NotFoundError: no such output.
        """
        ctl = self.controller
        who = _component_identity(identity)
        try:
            _, changed = ctl.change_output(who, bool(desired_state))
            return True, changed
        except SmartDevError as err:
            try:
                output = ctl.component("output", who)
                device: Optional[Dict[str, Any]] = ctl.device(output["DeviceID"])
            except SmartDevError:
                device = None
            if not self._offline(err, device):
                raise
            assert device is not None
            if not device.get("ExpectOffline"):
                self._log(logging.WARNING, f"{device['Name']} (ID: {device['ID']}) is offline, cannot change "
                          f"output {output['Name']}: {device.get('LastError') or err}")
            return False, False

    def pull_webhook_event(
        self,
        device_id: Optional[int] = None,
        device_name: Optional[str] = None,
        component_id: Optional[int] = None,
        component_name: Optional[str] = None,
    ) -> Optional[Dict[str, Any]]:
        """Takes the oldest queued webhook event, or ``None``: a dict with ``Event`` (e.g.
        ``"input.toggle_on"``), ``Component`` (its name), ``ComponentID``, ``ObjectType``, ``Device``,
        ``DeviceID``, ``ReceivedAt``, ``Source``, ``Params``, ``Channel`` (``"webhook"``, ``"push"``,
        ``"mqtt"``, ``"coiot"`` (Gen1), or ``"read"`` for smartdev's own ``device.profile_changed``).
        With filters, the oldest event matching all of them (the others stay queued, in order)."""
        ctl = self.controller
        wanted = [(k, v) for k, v in (("DeviceID", device_id), ("Device", device_name),
                                      ("ComponentID", component_id), ("Component", component_name))
                  if v is not None]
        with self._lock:
            if not wanted:
                return self._held.popleft() if self._held else ctl.pull_webhook_event()
            while True:
                event = ctl.pull_webhook_event()
                if event is None:
                    break
                if len(self._held) >= _HELD_EVENTS:
                    dropped = self._held.popleft()
                    self._log(logging.WARNING, f"webhook event dropped (too many held back by filters): {dropped}")
                self._held.append(event)
            for i, event in enumerate(self._held):
                if all(event.get(k) == v for k, v in wanted):
                    del self._held[i]
                    return event
            return None

    def is_device_online(self, identity: Optional[CompatIdentity] = None) -> bool:
        """Contacts the device now and says whether it answered (never raises for an unreachable device).
        Without an identity: every device, True when all answered."""
        ctl = self.controller
        if identity is None:
            self.refresh_all_device_statuses()
            return all(d.get("Online") is True for d in ctl.devices())
        return ctl.read_device_online(_device_identity(identity))

    def refresh_all_device_statuses(self) -> None:
        """Reads every device now, all at once. A device that cannot be reached, or does not answer in time, is
        marked offline with its ``LastError`` and does not stop the others.

        Raises:
            the first error that needs fixing rather than waiting (a wrong password, an unreadable simulation
            file); ClosedError after :meth:`shutdown`.
        """
        try:
            self.controller.refresh_all()
        except SmartDevError as err:
            if err.code_name in ("SD_TIMEOUT", "SD_OFFLINE", "SD_DEVICE", "SD_WORKER_FAILED"):
                return
            raise

    def refresh(self) -> None:
        """The same as :meth:`refresh_all_device_statuses`."""
        self.refresh_all_device_statuses()

    # -- views ---------------------------------------------------------------------------------------------

    @property
    def devices(self) -> List[Dict[str, Any]]:
        """Every device's object as last read."""
        return self.controller.devices()

    def _components(self, key: str) -> List[Dict[str, Any]]:
        return [c for d in self.controller.devices() for c in d.get(key, [])]

    @property
    def inputs(self) -> List[Dict[str, Any]]:
        """Every input's object as last read."""
        return self._components("Inputs")

    @property
    def outputs(self) -> List[Dict[str, Any]]:
        """Every output's object as last read."""
        return self._components("Outputs")

    @property
    def meters(self) -> List[Dict[str, Any]]:
        """Every meter's object as last read."""
        return self._components("Meters")

    @property
    def temp_probes(self) -> List[Dict[str, Any]]:
        """Every temperature probe's object as last read."""
        return self._components("TempProbes")

    # -- lifecycle -----------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stops the webhook listener, every device thread and the wake relay. Idempotent; no log record reaches
        the logger once it returns."""
        ctl, self._ctl = self._ctl, None
        if ctl is not None:
            ctl.close()
        relay, self._relay = self._relay, None
        if relay is not None and relay is not threading.current_thread():
            relay.join(5)

    def __enter__(self) -> "SmartDevice":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __del__(self) -> None:
        # Backstop for an object that was never shut down. Inside a log callback (the garbage collector may run
        # there), closing would wait for that very thread: hand it over.
        try:
            if getattr(_in_callback, "active", False):
                threading.Thread(target=self.shutdown, name="smartdev-shutdown").start()
            else:
                self.shutdown()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<smartdev.SmartDevice {'closed' if self._ctl is None else 'open'}>"


#: sc-smart-device's name for the class.
SCSmartDevice = SmartDevice
