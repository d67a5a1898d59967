"""Checks that /app/out.txt holds the word hello."""

import os
from pathlib import Path

# APP_DIR lets the same tests run against a copy of /app outside a container.
APP = Path(os.environ.get("APP_DIR", "/app"))


def test_output_exists():
    assert (APP / "out.txt").is_file()


def test_output_is_hello():
    assert (APP / "out.txt").read_text().strip() == "hello"
