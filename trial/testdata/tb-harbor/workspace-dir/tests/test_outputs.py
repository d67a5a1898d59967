"""Reads what the solution wrote in its working directory, /workspace."""

import os


def test_report():
    with open("/workspace/report.txt") as f:
        assert f.read() == "status: ok\n"


def test_out():
    assert os.path.isfile("/workspace/out/done")
