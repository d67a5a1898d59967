"""Runs /app/rotate.sh against scratch copies of the log directory."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

APP = Path(os.environ.get("APP_DIR", "/app"))
SCRIPT = APP / "rotate.sh"


@pytest.fixture
def state(tmp_path):
    logs = APP / "logs"
    archive = APP / "archive"
    saved = tmp_path / "saved"
    shutil.copytree(APP, saved, symlinks=True)
    yield logs, archive
    shutil.rmtree(logs)
    shutil.rmtree(archive)
    shutil.copytree(saved / "logs", logs)
    shutil.copytree(saved / "archive", archive)


def rotate(logs):
    env = dict(os.environ, LOG_DIR=str(logs))
    subprocess.run([str(SCRIPT)], check=True, env=env, timeout=30)


def test_script_is_executable():
    assert SCRIPT.is_file() and os.access(SCRIPT, os.X_OK)


def test_rotates_once(state):
    logs, archive = state
    before = (logs / "app.log").read_bytes()
    rotate(logs)
    assert (archive / "app.log.1").read_bytes() == before
    assert (logs / "app.log").read_bytes() == b""


def test_keeps_mode(state):
    logs, _ = state
    mode = stat.S_IMODE((logs / "app.log").stat().st_mode)
    rotate(logs)
    assert stat.S_IMODE((logs / "app.log").stat().st_mode) == mode


def test_keep_limit(state):
    logs, archive = state
    for i in range(5):
        (logs / "app.log").write_text(f"round {i}\n")
        rotate(logs)
    names = sorted(p.name for p in archive.iterdir())
    assert names == ["app.log.1", "app.log.2", "app.log.3"]
    assert (archive / "app.log.1").read_text() == "round 4\n"


def test_empty_log_is_noop(state):
    logs, archive = state
    (logs / "app.log").write_text("")
    before = sorted(p.name for p in archive.iterdir())
    rotate(logs)
    assert sorted(p.name for p in archive.iterdir()) == before
