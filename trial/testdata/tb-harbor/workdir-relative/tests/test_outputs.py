"""Reads the answer by relative paths, as tests run from the image's
working directory do."""

import subprocess


def test_answer_file():
    with open("data/answer.txt") as f:
        assert f.read().strip() == "42"


def test_check_script():
    assert subprocess.run(["./check.sh"], capture_output=True, text=True).stdout.strip() == "42"
