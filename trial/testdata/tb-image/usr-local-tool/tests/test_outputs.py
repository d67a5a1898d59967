"""Runs the wordfreq the solution installed under /usr/local/bin, outside
the writable directories, with the stop words it keeps under /opt."""

import shutil
import subprocess


def test_installed_on_path():
    assert shutil.which("wordfreq") == "/usr/local/bin/wordfreq"


def test_counts():
    out = subprocess.run(["wordfreq"], input="The cat and the dog. A cat!\n", capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["2 cat", "1 and", "1 dog"]


def test_stopwords():
    with open("/opt/wordfreq/stopwords") as f:
        assert {w.strip() for w in f} >= {"a", "an", "the"}
