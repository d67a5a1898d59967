"""Checks /app/summary.json against /app/sales.csv."""

import json
from pathlib import Path


def summary():
    return json.loads(Path("/app/summary.json").read_text())


def test_totals():
    assert summary() == {"east": 15, "north": 15, "south": 9, "west": 1}


def test_regions_sorted():
    assert list(summary()) == ["east", "north", "south", "west"]


def test_integers():
    assert all(type(v) is int for v in summary().values())
