"""Runs the script as a user would, so it imports the module beside it."""

import subprocess


def test_run_by_path():
    out = subprocess.run(["python3", "/app/run.py"], capture_output=True, text=True)
    assert out.stdout.strip() == "hello from helper", out.stderr


def test_run_from_app():
    out = subprocess.run(["python3", "run.py"], cwd="/app", capture_output=True, text=True)
    assert out.stdout.strip() == "hello from helper", out.stderr
