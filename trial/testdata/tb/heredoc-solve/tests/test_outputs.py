"""Checks /app/bin/tally and /app/tally.txt."""

import os
import subprocess
import tempfile
from pathlib import Path

TOOL = Path("/app/bin/tally")


def test_tool_executable():
    assert TOOL.is_file() and os.access(TOOL, os.X_OK)


def test_tally_file():
    assert Path("/app/tally.txt").read_text() == "a.txt: 4\nb.txt: 2\n"


def test_tool_on_fresh_files():
    with tempfile.TemporaryDirectory() as d:
        Path(d, "z.txt").write_text("x y z\n")
        Path(d, "m.txt").write_text("")
        Path(d, "skip.log").write_text("a b\n")
        out = subprocess.run([str(TOOL), d], capture_output=True, text=True, check=True).stdout
    assert out == "m.txt: 0\nz.txt: 3\n"
