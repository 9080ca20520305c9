"""Finding and loading ``libsmartdev`` and declaring the C prototypes (``include/smartdev.h``).

The library is loaded on first use, not at import, so ``import smartdev`` (for its exceptions and helpers)
works without it. Discovery order:

1. the environment variable ``SMARTDEV_LIB`` (full path to ``libsmartdev.so`` / ``.dylib`` / ``smartdev.dll``),
   for developers trying another build;
2. the library inside this package (``smartdev/libsmartdev.so``): where ``pip install`` puts it, built from
   the crate in release mode;
3. only for a source checkout run in place (this package is ``bindings/python/smartdev`` of a repository
   holding ``Cargo.toml`` and ``include/smartdev.h``, imported through ``PYTHONPATH=bindings/python``): the
   newer of the ``debug`` and ``release`` builds in ``$CARGO_TARGET_DIR`` (when set; relative to the
   repository, as cargo runs there), else in the repository's ``target/``.

An installed package never looks in a ``target/`` folder. "Newer" is the file's modification time, so the
build made last wins: ``cargo build --lib`` after a release build loads the debug library.
:func:`library_path` (``smartdev.library_path()``) says which file was loaded.

Every function used has its ``argtypes`` and ``restype`` set: the ctypes default (``int``) would truncate
pointers. The library is loaded with :class:`ctypes.CDLL`, which releases the GIL during each call, so the
library's own threads can run Python log callbacks while a call is in progress.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_void_p,
)
from pathlib import Path
from typing import List, Optional

from .errors import LibraryNotFoundError

__all__ = ["lib", "library_path", "OpenOptions", "MeterReading", "LOG_FUNC", "UPDATE_FUNC", "find_library"]

#: ``sd_log_callback``: ``void (*)(void *user, int level, const char *message)``.
LOG_FUNC = CFUNCTYPE(None, c_void_p, c_int, c_char_p)

#: ``sd_update_callback``: ``void (*)(void *user_data, int step, const char *from, const char *to)``.
UPDATE_FUNC = CFUNCTYPE(None, c_void_p, c_int, c_char_p, c_char_p, c_int)


class OpenOptions(Structure):
    """``struct sd_open_options``; filled with defaults by ``sd_open_options_init``."""

    _fields_ = [
        ("schema_path", c_char_p),
        ("schema_yaml", c_char_p),
        ("models_path", c_char_p),
        ("log_callback", LOG_FUNC),
        ("log_user", c_void_p),
        ("log_level", c_int),
        ("wake", c_bool),
    ]


class MeterReading(Structure):
    """``struct sd_meter_reading``: six values, each with a validity flag."""

    _fields_ = [
        ("power", c_double),
        ("voltage", c_double),
        ("current", c_double),
        ("power_factor", c_double),
        ("energy", c_double),
        ("returned_energy", c_double),
        ("has_power", c_bool),
        ("has_voltage", c_bool),
        ("has_current", c_bool),
        ("has_power_factor", c_bool),
        ("has_energy", c_bool),
        ("has_returned_energy", c_bool),
    ]


class LightChangeStruct(Structure):
    """``struct sd_light_change``: each value is used only when its ``set_*`` flag is true."""

    _fields_ = [
        ("set_on", c_bool),
        ("on", c_bool),
        ("set_brightness", c_bool),
        ("brightness", c_double),
        ("set_temperature", c_bool),
        ("temperature", c_uint32),
        ("set_rgb", c_bool),
        ("rgb", c_uint8 * 3),
        ("set_white", c_bool),
        ("white", c_double),
        ("set_transition", c_bool),
        ("transition", c_double),
    ]


_ctl = c_void_p  # const sd_controller *
_buf = ctypes.c_char_p  # char * (a create_string_buffer is accepted)
_size_p = POINTER(c_size_t)
_bool_p = POINTER(c_bool)

#: name -> (restype, argtypes) for every C function the binding uses.
_PROTOTYPES = {
    "sd_version": (c_char_p, []),
    "sd_result_name": (c_char_p, [c_int]),
    "sd_last_error_message": (c_int, [_buf, c_size_t, _size_p]),
    "sd_open_options_init": (c_int, [POINTER(OpenOptions)]),
    "sd_open": (c_int, [c_char_p, POINTER(OpenOptions), POINTER(c_void_p)]),
    "sd_open_yaml": (c_int, [c_char_p, POINTER(OpenOptions), POINTER(c_void_p)]),
    "sd_set_log_callback": (c_int, [LOG_FUNC, c_void_p, c_int]),
    "sd_close": (None, [POINTER(c_void_p)]),
    "sd_read_device": (c_int, [_ctl, c_char_p, c_int64]),
    "sd_device": (c_int, [_ctl, c_char_p, c_int64, _buf, c_size_t, _size_p]),
    "sd_check_firmware": (c_int, [_ctl, c_char_p, c_int64, _buf, c_size_t, _size_p]),
    "sd_update_firmware": (c_int, [_ctl, c_char_p, c_int64, c_int, c_bool, c_double]),
    "sd_update_firmware_progress": (
        c_int,
        [_ctl, c_char_p, c_int64, c_int, c_bool, c_double, UPDATE_FUNC, c_void_p],
    ),
    "sd_energy_history": (c_int, [_ctl, c_char_p, c_int64, c_int64, c_int64, _buf, c_size_t, _size_p]),
    "sd_energy_history_last": (c_int, [_buf, c_size_t, _size_p]),
    "sd_get_device": (c_int, [_ctl, c_char_p, c_int64, _buf, c_size_t, _size_p]),
    "sd_get_device_component": (c_int, [_ctl, c_int, c_char_p, c_int64, _buf, c_size_t, _size_p]),
    "sd_devices": (c_int, [_ctl, _buf, c_size_t, _size_p]),
    "sd_discover": (c_int, [_ctl, c_uint32, _buf, c_size_t, _size_p]),
    "sd_discovered": (c_int, [_buf, c_size_t, _size_p]),
    "sd_component": (c_int, [_ctl, c_int, c_char_p, c_int64, _buf, c_size_t, _size_p]),
    "sd_set_light": (c_int, [_ctl, c_char_p, c_int64, POINTER(LightChangeStruct), _buf, c_size_t, _size_p]),
    "sd_change_output": (c_int, [_ctl, c_char_p, c_int64, c_bool, _bool_p, _bool_p]),
    "sd_toggle_output": (c_int, [_ctl, c_char_p, c_int64, _bool_p, _bool_p]),
    "sd_refresh_all": (c_int, [_ctl, _size_p]),
    "sd_read_device_online": (c_int, [_ctl, c_char_p, c_int64, _bool_p]),
    "sd_pull_event": (c_int, [_ctl, _buf, c_size_t, _size_p]),
    "sd_wake_fd": (c_int, [_ctl]),
    "sd_wake_clear": (c_int, [_ctl]),
    "sd_wake_wait": (c_int, [_ctl, c_int64]),
    "sd_webhook_address": (c_int, [_ctl, _buf, c_size_t, _size_p]),
    "sd_print_device_status": (c_int, [_ctl, _buf, c_size_t, _size_p]),
    "sd_print_model_library": (c_int, [_ctl, c_char_p, c_char_p, _buf, c_size_t, _size_p]),
    "sd_output_state": (c_int, [_ctl, c_char_p, c_int64, _bool_p]),
    "sd_input_state": (c_int, [_ctl, c_char_p, c_int64, _bool_p]),
    "sd_meter": (c_int, [_ctl, c_char_p, c_int64, POINTER(MeterReading)]),
    "sd_is_device_online": (c_int, [_ctl, c_char_p, c_int64, _bool_p]),
    "sd_sensor_value": (c_int, [_ctl, c_char_p, c_int64, POINTER(c_double)]),
    "sd_open_cover": (c_int, [_ctl, c_char_p, c_int64]),
    "sd_close_cover": (c_int, [_ctl, c_char_p, c_int64]),
    "sd_stop_cover": (c_int, [_ctl, c_char_p, c_int64]),
    "sd_set_cover_position": (c_int, [_ctl, c_char_p, c_int64, c_uint8]),
}


def _file_name() -> str:
    if sys.platform == "darwin":
        return "libsmartdev.dylib"
    if sys.platform.startswith("win"):
        return "smartdev.dll"
    return "libsmartdev.so"


def _packaged() -> Path:
    """Where ``pip install`` puts the library: next to this file."""
    return Path(__file__).resolve().parent / _file_name()


def _repo_root(package: Optional[Path] = None) -> Optional[Path]:
    """The smartdev repository this package (``package``: default, this one's folder) is run in place from
    (``<root>/bindings/python/smartdev``), if any. An installed package (in ``site-packages``) has none, even
    in a virtual environment inside a repository."""
    if package is None:
        package = Path(__file__).resolve().parent
    root = package.parents[2]
    if (
        package == root / "bindings" / "python" / "smartdev"
        and (root / "Cargo.toml").is_file()
        and (root / "include" / "smartdev.h").is_file()
    ):
        return root
    return None


def _target_dirs() -> List[Path]:
    """For a checkout run in place, the cargo target directories to look in, in order:
    ``$CARGO_TARGET_DIR``, then the repository's ``target/``. None for an installed package."""
    root = _repo_root()
    if root is None:
        return []
    dirs: List[Path] = []
    target_env = os.environ.get("CARGO_TARGET_DIR")
    if target_env:
        target = Path(target_env)
        if not target.is_absolute():
            target = root / target
        dirs.append(target)
    if (root / "target") not in dirs:
        dirs.append(root / "target")
    return dirs


def _candidates() -> List[List[Path]]:
    """In order, groups of files of which the newest existing one is loaded: the packaged library, then per
    target directory its debug and release library."""
    name = _file_name()
    return [[_packaged()]] + [[d / "debug" / name, d / "release" / name] for d in _target_dirs()]


def _newest(paths: List[Path]) -> Optional[Path]:
    """The most recently modified existing file of ``paths`` (the first on a tie), if any."""
    best: Optional[Path] = None
    best_time = 0.0
    for p in paths:
        try:
            if not p.is_file():
                continue
            t = p.stat().st_mtime
        except OSError:
            continue
        if best is None or t > best_time:
            best, best_time = p, t
    return best


def _how_to_fix() -> str:
    root = _repo_root()
    if root is None:
        return (
            f"reinstall the package (pip install smartdev, or pip install <smartdev repository>, which builds "
            f"the library; needs Rust), or set SMARTDEV_LIB to the full path of {_file_name()}"
        )
    return (
        f"build it with `cd {root} && cargo build --lib` (or `cargo build --lib --release`), "
        f"or set SMARTDEV_LIB to the full path of {_file_name()}"
    )


def find_library() -> Path:
    """The path of the shared library to load (see the module docstring), or :class:`LibraryNotFoundError`."""
    env = os.environ.get("SMARTDEV_LIB")
    if env:
        p = Path(env)
        if not p.is_file():
            raise LibraryNotFoundError(
                f"SMARTDEV_LIB is set to {env!r}, which is not a file; {_how_to_fix()}"
            )
        return p
    groups = _candidates()
    for group in groups:
        found = _newest(group)
        if found is not None:
            return found
    listed = ", ".join(str(p) for g in groups for p in g)
    raise LibraryNotFoundError(f"the smartdev shared library was not found (looked for {listed}); {_how_to_fix()}")


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[Path] = None


def lib() -> ctypes.CDLL:
    """The loaded library with every prototype declared (loaded once, on first use)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = find_library()
            try:
                handle = ctypes.CDLL(str(path))
            except OSError as e:
                raise LibraryNotFoundError(f"cannot load {path}: {e}; {_how_to_fix()}") from e
            for name, (restype, argtypes) in _PROTOTYPES.items():
                try:
                    fn = getattr(handle, name)
                except AttributeError:
                    raise LibraryNotFoundError(
                        f"{path} does not export {name}: it is not libsmartdev or is older than this "
                        f"binding; {_how_to_fix()}"
                    ) from None
                fn.restype = restype
                fn.argtypes = argtypes
            _path = path
            _lib = handle
    return _lib


def library_path() -> Path:
    """The path of the shared library in use (loads it if needed; see the module docstring for the order)."""
    lib()
    assert _path is not None
    return _path
