"""Checks /app/top5.txt against the word counts of /app/corpus.txt."""

import collections
import hashlib
import os
import re
from pathlib import Path

# APP_DIR lets the same tests run against a copy of /app outside a container.
APP = Path(os.environ.get("APP_DIR", "/app"))
CORPUS_SHA256 = "6ddeafb8ef889312b1465cd41649931e26c8e1469fac8f131dc9e2b919d573ad"


def expected():
    words = re.findall(r"[a-z]+", (APP / "corpus.txt").read_text().lower())
    counts = collections.Counter(words)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [f"{w} {n}" for w, n in ranked[:5]]


def lines():
    return (APP / "top5.txt").read_text().splitlines()


def test_output_exists():
    assert (APP / "top5.txt").is_file(), "top5.txt was not created"


def test_five_lines():
    assert len(lines()) == 5


def test_line_format():
    for line in lines():
        assert re.fullmatch(r"[a-z]+ [0-9]+", line), f"bad line {line!r}"


def test_counts_and_order():
    assert lines() == expected()


def test_corpus_untouched():
    data = (APP / "corpus.txt").read_bytes()
    assert hashlib.sha256(data).hexdigest() == CORPUS_SHA256
