"""Checks what /app/greet.py printed with six installed."""

from pathlib import Path


def test_output():
    assert Path("/app/out.txt").read_text() == "six 1.16.0 says hello\n"
