"""The READMEs' Python blocks: every one is valid Python as pasted, and the programs of the top-level README's
``## Python`` section (the quick start and the asyncio form) and of bindings/python/README.md run.

Also a script for CI, which runs the same programs against the installed wheel, outside the repository:
``python3 test_readme.py --write-blocks DIR`` writes the ``## Python`` section's blocks to
``DIR/readme_python_<n>.py`` (and prints their names) for ``python`` and ``mypy --strict``.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import sys
import tempfile
import unittest
from typing import List

ROOT = pathlib.Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PACKAGE_README = ROOT / "bindings" / "python" / "README.md"


def blocks_of(text: str) -> List[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def python_blocks() -> List[str]:
    """Every ``python`` block of the top-level README."""
    return blocks_of(README.read_text(encoding="utf-8"))


def python_section_blocks() -> List[str]:
    """The blocks of the top-level README's ``## Python`` section: complete programs, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Python\n")
    end = text.index("\n## ", start + 1)
    return blocks_of(text[start:end])


def run_block(block: str, name: str) -> str:
    """Runs ``block`` as ``__main__`` in a fresh temporary folder (its simulation files go there); its output."""
    with tempfile.TemporaryDirectory() as folder:
        old = os.getcwd()
        os.chdir(folder)
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, name, "exec"), {"__name__": "__main__"})
        finally:
            os.chdir(old)
    return out.getvalue()


class ReadmeBlocksTest(unittest.TestCase):
    def test_every_python_block_compiles(self) -> None:
        for readme in (README, PACKAGE_README):
            blocks = blocks_of(readme.read_text(encoding="utf-8"))
            self.assertGreaterEqual(len(blocks), 1)
            for i, block in enumerate(blocks):
                with self.subTest(readme=readme.name, block=i):
                    compile(block, f"{readme} python block {i}", "exec")

    def test_the_python_section_starts_with_the_install_command(self) -> None:
        text = README.read_text(encoding="utf-8")
        section = text[text.index("\n## Python\n") :]
        first = re.search(r"```(\w+)\n(.*?)```", section, flags=re.S)
        assert first is not None
        self.assertEqual(first.group(1), "sh")
        self.assertTrue(first.group(2).startswith("pip install"), first.group(2))

    def test_the_quick_start_runs_on_simulated_devices(self) -> None:
        quick_start = python_section_blocks()[0]
        self.assertEqual(quick_start, python_blocks()[0])  # the README's first Python block
        self.assertIn("from smartdev import", quick_start)
        self.assertLessEqual(len(quick_start.strip().splitlines()), 10)
        out = run_block(quick_start, "README quick start")
        self.assertIn("Output 1: on (switched)", out)
        self.assertIn("Garage: online", out)
        self.assertIn("Garage (ID: 1) — online", out)
        self.assertNotRegex(out, r"\b(None|True|False)\b")

    def test_the_asyncio_form_receives_an_event(self) -> None:
        block = python_section_blocks()[1]
        self.assertIn("async for event in ctl.events()", block)
        out = run_block(block, "README asyncio form")
        self.assertEqual(out, "input.toggle_on from Garage / Input 1\n")

    def test_the_package_readme_programs_run(self) -> None:
        blocks = blocks_of(PACKAGE_README.read_text(encoding="utf-8"))
        programs = [b for b in blocks if "asyncio.run(" in b or "with Controller(" in b]
        self.assertGreaterEqual(len(programs), 2)
        for i, block in enumerate(programs):
            with self.subTest(block=i):
                out = run_block(block, f"bindings/python/README.md program {i}")
                self.assertTrue(out)
                self.assertNotRegex(out, r"\b(None|True|False)\b")


def write_blocks(folder: str) -> None:
    """CI: the ``## Python`` section's blocks as files, to run and type-check against the installed package."""
    target = pathlib.Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for i, block in enumerate(python_section_blocks()):
        path = target / f"readme_python_{i}.py"
        path.write_text(block, encoding="utf-8")
        print(path)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-blocks":
        write_blocks(sys.argv[2])
    else:
        unittest.main()
