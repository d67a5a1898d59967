"""Looks for crc32sum where the task installs it, runs it, and checks that it
uses the image's zlib."""

import os
import shutil
import subprocess
import zlib

PATH = "/app/bin:" + os.environ["PATH"]


def crc(data):
    tool = shutil.which("crc32sum", path=PATH)
    assert tool, "crc32sum is not on the PATH"
    return subprocess.run([tool], input=data, capture_output=True, check=True).stdout.decode()


def test_tool_installed():
    assert shutil.which("crc32sum", path=PATH) == "/app/bin/crc32sum"


def test_checksums():
    for data in [b"", b"hello\n", bytes(range(256)) * 1000]:
        assert crc(data) == "%08x\n" % zlib.crc32(data)


def test_links_zlib():
    out = subprocess.run(["ldd", "/app/bin/crc32sum"], capture_output=True, text=True, check=True).stdout
    assert "libz.so.1" in out
