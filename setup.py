"""Builds the `smartdev` wheel: the ctypes package plus the crate's shared library, in release mode.

setuptools-rust with ``Binding.NoBinding`` builds the cdylib without any Python binding crate (the package
loads it with ctypes). Two adjustments make it a ctypes package rather than an extension module:

* the library is installed as ``smartdev/libsmartdev.so`` (``.dylib``, ``smartdev.dll``), the name the loader
  looks for, instead of an extension-module name such as ``libsmartdev.cpython-311-x86_64-linux-gnu.so``;
* the wheel is tagged ``py3-none-<platform>``: it holds no code compiled against CPython, so any CPython 3.9+
  on that platform can use it. The platform is the plain ``linux_x86_64`` (not manylinux: not audited).

The version is Cargo.toml's, so the package and the library it carries cannot disagree. The library is built
without the crate's default ``emulator`` feature: the C ABI exposes nothing of the emulator, so it would only
add code (``sdctl emulate``, installed with ``cargo install``, is the emulator; ``bindings/c/install.sh`` does
the same).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools_rust import Binding, RustExtension, build_rust

ROOT = Path(__file__).resolve().parent


def crate_version() -> str:
    """``version`` of Cargo.toml's ``[package]`` table."""
    text = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    package = re.search(r"^\[package\]\s*$(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
    found = re.search(r'^version\s*=\s*"([^"]+)"', package.group(1) if package else "", flags=re.M)
    if found is None:
        raise RuntimeError("no version in Cargo.toml's [package]")
    return found.group(1)


def library_file_name() -> str:
    """What cargo calls the cdylib on this platform, and what ``smartdev._native`` loads."""
    if sys.platform == "darwin":
        return "libsmartdev.dylib"
    if sys.platform.startswith("win"):
        return "smartdev.dll"
    return "libsmartdev.so"


class BuildRust(build_rust):
    def get_dylib_ext_path(self, ext: RustExtension, target_fname: str) -> str:
        path = super().get_dylib_ext_path(ext, target_fname)
        return os.path.join(os.path.dirname(path), library_file_name())


class BdistWheel(bdist_wheel):  # type: ignore[misc]
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False  # platform-specific: it carries a native library

    def get_tag(self) -> tuple[str, str, str]:
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    version=crate_version(),
    rust_extensions=[
        RustExtension(
            "smartdev.libsmartdev",
            path="Cargo.toml",
            binding=Binding.NoBinding,
            debug=False,
            args=["--no-default-features", "--locked"],
        )
    ],
    cmdclass={"build_rust": BuildRust, "bdist_wheel": BdistWheel},
)
