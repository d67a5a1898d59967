// Package verifier turns what a Harbor verifier left behind into one
// report, and a report into a reward.
//
// # Inputs
//
// After tests/test.sh ran, /logs/verifier may hold:
//
//	ctrf.json    CTRF JSON (ctrf.io), as pytest-json-ctrf writes it:
//	             {"results": {"tool": {…}, "summary": {…},
//	              "tests": [{"name", "status": passed|failed|skipped|pending|other,
//	                         "message", "trace", …}]}}
//	junit.xml    JUnit XML, as pytest --junitxml writes it:
//	             <testsuites><testsuite><testcase classname name>
//	               [<failure message>|<error message>|<skipped message>]
//	reward.json  {"reward": 1.0, …}: metric name → number
//	reward.txt   one number, e.g. "1"
//
// plus test.sh's exit code, which always exists.
//
// # Precedence
//
//	CTRF ─▶ JUnit ─▶ reward.json ─▶ reward.txt ─▶ exit code
//	└ per assertion ┘ └──────── binary (Fallback) ────────┘
//
// The first source present, parseable and non-empty gives the result; a
// malformed or empty one is recorded in Report.Problems and the next is
// tried. The exit code ends the chain, so every run has a result. Reward
// files are read whatever wins and their value is kept in Report.Reward.
// Text from reports is bounded (names 512 bytes, messages 2 KiB, files
// 16 MiB) and made valid UTF-8.
//
// # Reward (ARCHITECTURE.md §1.4)
//
// RewardFunc{Mode, Scale}: count = passed × Scale (the recipe), fraction =
// passed / (total − skipped) × Scale, binary = Scale when solved. Without
// per-assertion results every mode is binary, so a solved task never
// scores zero. Scale is fixed before a run starts.
//
// # Offline verification
//
// Terminal-Bench test.sh files fetch uv, pytest and plugins at verify time.
// NeedsOffline finds such fetches (curl, wget, uv/uvx, pip, apt, npm, git
// clone, …); OfflinePytest builds the command that runs the task's pytest
// files with the local pytest (Debian python3-pytest: no CTRF plugin, so
// --junitxml) from the image's WORKDIR, and returns where the report lands.
package verifier
