"""Checks /app/convert.py and the /app/fahrenheit.csv it writes."""

import csv
import subprocess
from pathlib import Path

WANT = [["city", "fahrenheit"], ["Oslo", "25.7"], ["Lisbon", "62.6"], ["Cairo", "95.4"], ["Quito", "57.0"]]


def rows(path="/app/fahrenheit.csv"):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_output_converted():
    assert rows() == WANT


def test_script_runs_with_python():
    out = Path("/app/fahrenheit.csv")
    assert Path("/app/convert.py").is_file(), "convert.py was not written"
    out.unlink(missing_ok=True)
    subprocess.run(["python", "convert.py"], cwd="/app", check=True)
    assert rows() == WANT
