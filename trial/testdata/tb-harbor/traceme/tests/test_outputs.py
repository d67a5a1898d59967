"""Runs the anti-debugging check outside any debugger: it must say so."""

import subprocess


def test_clean_run():
    out = subprocess.run(["python3", "/app/guard.py"], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "clean"), out.stdout + out.stderr
