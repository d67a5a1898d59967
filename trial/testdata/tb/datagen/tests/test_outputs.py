"""Runs /app/stats.sh on the files gen_data.py wrote."""

import json
import subprocess
from pathlib import Path

DATA = Path("/tmp/verify-data")


def stats(name):
    return subprocess.run(["/app/stats.sh", str(DATA / name)], capture_output=True, text=True, check=True).stdout.strip()


def answers():
    return json.loads((DATA / "answers.json").read_text())


def test_sample():
    assert subprocess.run(["/app/stats.sh", "/app/sample.csv"], capture_output=True, text=True).stdout == "count=3 mean=4.00 max=9\n"


def test_generated_0():
    assert stats("data0.csv") == answers()["data0.csv"]


def test_generated_1():
    assert stats("data1.csv") == answers()["data1.csv"]


def test_generated_2():
    assert stats("data2.csv") == answers()["data2.csv"]
