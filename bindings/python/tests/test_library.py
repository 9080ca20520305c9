"""Which shared library is loaded: SMARTDEV_LIB, else the one inside the package (pip install), else, for a
checkout run in place only, CARGO_TARGET_DIR, else the repository's target/, and in a target directory the
newer of the debug and release builds; ``smartdev.library_path()`` says which."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Dict, Optional
from unittest import mock

import smartdev
from smartdev import LibraryNotFoundError, _native

NAME = _native._file_name()


class FakeRepository(unittest.TestCase):
    """A temporary folder standing in for the repository (``_repo_root``), with fake library files."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="smartdev-py-lib-")
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name)
        patcher = mock.patch.object(_native, "_repo_root", return_value=self.root)
        patcher.start()
        self.addCleanup(patcher.stop)
        # Where pip puts the library (absent unless a test makes it).
        self.packaged = self.root / "bindings" / "python" / "smartdev" / NAME
        patcher = mock.patch.object(_native, "_packaged", return_value=self.packaged)
        patcher.start()
        self.addCleanup(patcher.stop)

    def package(self, mtime: float) -> Path:
        """A fake library inside the package, as ``pip install`` leaves it, modified at ``mtime``."""
        self.packaged.parent.mkdir(parents=True, exist_ok=True)
        self.packaged.write_bytes(b"not really a library")
        os.utime(self.packaged, (mtime, mtime))
        return self.packaged

    def build(self, target: str, profile: str, mtime: float) -> Path:
        """A fake ``<root>/<target>/<profile>/libsmartdev.so`` modified at ``mtime``."""
        p = self.root / target / profile / NAME
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"not really a library")
        os.utime(p, (mtime, mtime))
        return p

    def find(self, **env: Optional[str]) -> Path:
        """``find_library()`` with SMARTDEV_LIB and CARGO_TARGET_DIR unset unless given."""
        unset = ("SMARTDEV_LIB", "CARGO_TARGET_DIR")
        patched: Dict[str, str] = {k: v for k, v in os.environ.items() if k not in unset}
        patched.update({k: v for k, v in env.items() if v is not None})
        with mock.patch.dict(os.environ, patched, clear=True):
            return _native.find_library()


class DiscoveryTest(FakeRepository):
    def test_the_newer_of_debug_and_release_wins(self) -> None:
        release = self.build("target", "release", 1_000_000)
        debug = self.build("target", "debug", 2_000_000)
        # `cargo build --lib` after a release build: the debug library, not the older release one.
        self.assertEqual(self.find(), debug)
        os.utime(release, (3_000_000, 3_000_000))
        self.assertEqual(self.find(), release)

    def test_one_build_alone_is_found(self) -> None:
        release = self.build("target", "release", 1_000_000)
        self.assertEqual(self.find(), release)

    def test_cargo_target_dir_comes_before_the_repository_target(self) -> None:
        self.build("target", "debug", 9_000_000)
        custom = self.build("custom", "release", 1_000_000)
        self.assertEqual(self.find(CARGO_TARGET_DIR=str(self.root / "custom")), custom)
        # Relative: to the repository, where cargo runs.
        self.assertEqual(self.find(CARGO_TARGET_DIR="custom"), custom)
        newer = self.build("custom", "debug", 2_000_000)
        self.assertEqual(self.find(CARGO_TARGET_DIR="custom"), newer)

    def test_an_empty_cargo_target_dir_falls_back_to_the_repository_target(self) -> None:
        repo = self.build("target", "debug", 1_000_000)
        (self.root / "empty").mkdir()
        self.assertEqual(self.find(CARGO_TARGET_DIR="empty"), repo)

    def test_smartdev_lib_comes_first(self) -> None:
        self.build("target", "debug", 2_000_000)
        explicit = self.build("elsewhere", "x", 1_000_000)
        self.assertEqual(self.find(SMARTDEV_LIB=str(explicit), CARGO_TARGET_DIR="target"), explicit)
        with self.assertRaisesRegex(LibraryNotFoundError, "SMARTDEV_LIB is set to .*not a file"):
            self.find(SMARTDEV_LIB=str(self.root / "missing.so"))

    def test_nothing_built_lists_every_place_looked_at(self) -> None:
        with self.assertRaises(LibraryNotFoundError) as caught:
            self.find(CARGO_TARGET_DIR="custom")
        message = str(caught.exception)
        self.assertIn(str(self.packaged), message)
        for place in ["custom/debug", "custom/release", "target/debug", "target/release"]:
            self.assertIn(str(self.root / place / NAME), message)
        self.assertIn("cargo build --lib", message)

    def test_the_packaged_library_comes_before_any_build(self) -> None:
        self.build("target", "debug", 9_000_000)  # newer, but a build of the checkout
        packaged = self.package(1_000_000)
        self.assertEqual(self.find(), packaged)
        self.assertEqual(self.find(CARGO_TARGET_DIR="target"), packaged)
        explicit = self.build("elsewhere", "x", 1_000_000)
        self.assertEqual(self.find(SMARTDEV_LIB=str(explicit)), explicit)


class InstalledPackageTest(unittest.TestCase):
    """An installed package (site-packages) never looks in a target folder, even inside a repository."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix="smartdev-py-repo-")
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name)
        (self.root / "include").mkdir()
        (self.root / "include" / "smartdev.h").write_text("")
        (self.root / "Cargo.toml").write_text("")

    def test_a_checkout_run_in_place_is_a_repository(self) -> None:
        package = self.root / "bindings" / "python" / "smartdev"
        self.assertEqual(_native._repo_root(package), self.root)

    def test_a_venv_inside_the_repository_is_not(self) -> None:
        for package in [
            self.root / "v" / "lib" / "python3.11" / "site-packages" / "smartdev",
            self.root / "lib" / "python" / "smartdev",  # three levels up is the repository, but no bindings/
        ]:
            with self.subTest(package=str(package)):
                self.assertIsNone(_native._repo_root(package))

    def test_without_a_repository_only_the_package_is_looked_at(self) -> None:
        with mock.patch.object(_native, "_repo_root", return_value=None):
            env = {k: v for k, v in os.environ.items() if k not in ("SMARTDEV_LIB", "CARGO_TARGET_DIR")}
            env["CARGO_TARGET_DIR"] = str(self.root / "target")
            with mock.patch.dict(os.environ, env, clear=True):
                self.assertEqual(_native._candidates(), [[_native._packaged()]])
                with mock.patch.object(_native, "_packaged", return_value=self.root / "none" / NAME):
                    with self.assertRaises(LibraryNotFoundError) as caught:
                        _native.find_library()
        message = str(caught.exception)
        self.assertNotIn("target", message)
        self.assertIn("reinstall the package", message)
        self.assertIn("SMARTDEV_LIB", message)


class ExportsTest(unittest.TestCase):
    def test_all_lists_every_public_name_of_the_modules(self) -> None:
        from smartdev import controller, errors

        expected = set(controller.__all__) | set(errors.__all__) | {"SmartDevice", "SCSmartDevice", "library_path"}
        self.assertEqual(set(smartdev.__all__), expected)
        self.assertEqual(len(smartdev.__all__), len(set(smartdev.__all__)))
        for name in smartdev.__all__:
            self.assertTrue(hasattr(smartdev, name), name)


class VersionTest(unittest.TestCase):
    def test_the_package_version_is_the_crates(self) -> None:
        # setup.py takes the wheel's version from Cargo.toml; __version__ must say the same.
        root = _native._repo_root()
        if root is None:
            self.skipTest("not a checkout run in place")
        cargo = (root / "Cargo.toml").read_text(encoding="utf-8")
        match = re.search(r'^version = "([^"]+)"', cargo, flags=re.M)
        assert match is not None
        self.assertEqual(smartdev.__version__, match.group(1))


class LoadedLibraryTest(unittest.TestCase):
    def test_library_path_is_public(self) -> None:
        self.assertIs(smartdev.library_path, _native.library_path)
        self.assertIn("library_path", smartdev.__all__)
        self.assertTrue(smartdev.library_path().is_file())

    def test_a_fresh_process_loads_the_newest_build_of_cargo_target_dir(self) -> None:
        loaded = smartdev.library_path()
        target = loaded.parent.parent  # <target>/<profile>/libsmartdev.so
        expected = _native._newest([target / "debug" / NAME, target / "release" / NAME])
        env = {k: v for k, v in os.environ.items() if k != "SMARTDEV_LIB"}
        env["CARGO_TARGET_DIR"] = str(target)
        package = Path(smartdev.__file__).resolve().parent.parent
        env["PYTHONPATH"] = str(package)
        script = "import smartdev; print(smartdev.library_path()); print(smartdev.version())"
        out = subprocess.run(
            [sys.executable, "-c", script],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        path, version = out.stdout.splitlines()
        self.assertEqual(Path(path), expected)
        self.assertEqual(version, smartdev.version())


if __name__ == "__main__":
    unittest.main()
