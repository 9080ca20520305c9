"""The README's Python blocks: every one is valid Python as pasted, and the quick start runs."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import tempfile
import unittest

README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


class ReadmeBlocksTest(unittest.TestCase):
    def test_every_python_block_compiles(self) -> None:
        blocks = python_blocks()
        self.assertGreaterEqual(len(blocks), 1)
        for i, block in enumerate(blocks):
            with self.subTest(block=i):
                compile(block, f"README.md python block {i}", "exec")

    def test_the_quick_start_runs_on_simulated_devices(self) -> None:
        quick_start = python_blocks()[0]
        self.assertIn("from smartdev import", quick_start)
        with tempfile.TemporaryDirectory() as folder:
            old = os.getcwd()
            os.chdir(folder)  # its simulation files go here
            try:
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(quick_start, "README quick start", "exec"), {"__name__": "__main__"})
            finally:
                os.chdir(old)
        self.assertIn("Garage (ID: 1) — online", out.getvalue())


if __name__ == "__main__":
    unittest.main()
