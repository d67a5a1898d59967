"""Checks that uv ran."""

from pathlib import Path


def test_uv_version():
    assert Path("/app/uv.txt").read_text().startswith("uv 0.9.7")
