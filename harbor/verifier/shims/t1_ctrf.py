"""t1's stand-in for pytest-json-ctrf on an offline verifier: --ctrf PATH
writes a CTRF report (ctrf.io) of every test, collection errors included,
each error with its exception's line (the module a failed import names)."""

import json
import os
import time


def pytest_addoption(parser):
    parser.getgroup("ctrf").addoption(
        "--ctrf", action="store", dest="t1_ctrf", default=None, help="write a CTRF JSON report to this path")


def pytest_configure(config):
    path = config.getoption("t1_ctrf")
    if path:
        config.pluginmanager.register(_Report(path), "t1-ctrf-report")


def _error_line(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.splitlines()[0]
    lines = [l[1:].strip() for l in report.longreprtext.splitlines() if l.startswith("E ")]
    if lines:
        return lines[-1]
    text = report.longreprtext.strip().splitlines()
    return text[-1] if text else ""


class _Report:
    def __init__(self, path):
        self.path, self.tests, self.start = path, {}, int(time.time() * 1000)

    def _test(self, nodeid):
        return self.tests.setdefault(nodeid, {"name": nodeid, "status": "passed", "duration": 0})

    def pytest_runtest_logreport(self, report):
        t = self._test(report.nodeid)
        t["duration"] += int(report.duration * 1000)
        if report.failed:
            if t["status"] != "failed":
                t["status"], t["message"], t["trace"] = "failed", _error_line(report), report.longreprtext
        elif report.skipped and t["status"] == "passed":
            t["status"] = "skipped"
            if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
                t["message"] = str(report.longrepr[2])

    def pytest_collectreport(self, report):
        if report.failed:
            t = self._test(report.nodeid or "collection")
            t["status"], t["message"], t["trace"] = "failed", "collection failure: " + _error_line(report), report.longreprtext

    def pytest_sessionfinish(self, session):
        tests = list(self.tests.values())
        count = lambda s: sum(1 for t in tests if t["status"] == s)
        doc = {"results": {
            "tool": {"name": "pytest"},
            "summary": {"tests": len(tests), "passed": count("passed"), "failed": count("failed"),
                        "skipped": count("skipped"), "pending": 0, "other": 0,
                        "start": self.start, "stop": int(time.time() * 1000)},
            "tests": tests,
        }}
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(self.path, "w") as f:
            json.dump(doc, f, indent=1)
