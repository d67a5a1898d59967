"""Talks to the running server."""

import urllib.request


def get(path):
    with urllib.request.urlopen("http://127.0.0.1:8000" + path, timeout=10) as r:
        return r.read().decode()


def test_ping():
    assert get("/ping") == "pong"


def test_version():
    assert get("/version") == "1.4.2"
