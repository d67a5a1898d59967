"""Looks for rot13 where the task installs it, and runs it."""

import os
import shutil
import subprocess

PATH = "/app/bin:" + os.environ["PATH"]


def rot13(text):
    tool = shutil.which("rot13", path=PATH)
    assert tool, "rot13 is not on the PATH"
    return subprocess.run([tool], input=text, capture_output=True, text=True, check=True).stdout


def test_tool_installed():
    assert shutil.which("rot13", path=PATH) == "/app/bin/rot13"


def test_encodes():
    assert rot13("Hello, World!\n") == "Uryyb, Jbeyq!\n"


def test_round_trip():
    text = "The quick brown fox jumps over 13 lazy dogs."
    assert rot13(rot13(text)) == text
