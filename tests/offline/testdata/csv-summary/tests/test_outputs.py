import json
from pathlib import Path


def test_summary_is_json_object():
    data = json.loads(Path("/app/summary.json").read_text())
    assert isinstance(data, dict)


def test_totals():
    data = json.loads(Path("/app/summary.json").read_text())
    assert data == {"north": 70, "south": 43, "east": 50}


def test_top_region():
    assert Path("/app/top.txt").read_text().strip() == "north"


def test_input_unchanged():
    assert Path("/app/sales.csv").read_text().splitlines()[0] == "region,units,price"
