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
// clone, …). Such a test.sh still runs whole, every step of it, with
// stand-ins (WriteShims, uploaded at ShimDir, first on PATH: TestEnv)
// for the installers it calls:
//
//	curl|wget … astral.sh/uv …   prints an installer that writes ~/.local/bin/env (and
//	                             ~/.cargo/env) and uv/uvx there; other fetches run the real tool
//	apt-get|apt install P…       ok when dpkg has every P installed, else exit 100 naming the rest;
//	                             update, upgrade, clean: skipped
//	pip|pip3 install, python3 -m pip install, uv pip install, uv add, uv tool install
//	                             ok when every distribution (and -r file's) is installed in a
//	                             version its specifier accepts, else exit 1 naming the rest
//	uvx, uv run, uv tool run     the same for --with/--from, then the command; pytest and
//	                             python stand for the image's
//	pytest, python3 -m pytest    the image's pytest as isolated Python (-I -B,
//	                             -p no:cacheprovider); --ctrf PATH is written by
//	                             shims/t1_ctrf.py when pytest-json-ctrf is absent
//	uv venv, sync, init, python  a venv with the system's packages; skipped; the image's python3
//
// "The image" is the sandbox's root: the host's system directories in
// host mode; in image mode (sandbox.image: dockerfile) the task's image
// with a verifier layer of its own on top, made at build time from the
// mirror with what these installers would fetch and Debian provides
// (python3, python3-pytest, the packages test.sh's apt-get install names;
// image.Verifier), so pytest and the stand-ins run inside the image and
// nothing of the host's is found.
//
// Version specifiers (==, ===, !=, ~=, >=, <=, >, <, ==X.*, comma lists;
// PEP 440 ordering of releases, pre-, post- and dev-releases, local
// labels such as Debian's +repack ignored) are checked against the
// installed version. A pin of the test runner — pytest, pytest-*, and the
// CTRF and JUnit reporters (junit-xml, junitparser, ctrf*) — the image's
// version does not satisfy is used with a note, not refused: Debian's
// pytest is not the 8.x Terminal-Bench test.sh files pin. Any other pin
// it does not satisfy fails: "pip install numpy==2.1.0: present 1.24.2,
// the sandbox is offline".
//
// Each failure is one line "t1 offline verifier: …" on stderr naming what
// the image lacks. A test file that fails to import is one failed result
// whose message names the error ("collection failure: ModuleNotFoundError:
// No module named 'numpy'"), in CTRF and in JUnit.
//
// # Guarantees
//
// What package trial gives every verifier run (SECURITY.md, "Verifier",
// says what each stops): a fresh sandbox holding the attempt's snapshot,
// never the attempt's own; /tests replaced from the task; HOME (Home)
// and ShimDir emptied, then ShimDir filled with the verifier's own
// commands and put first on PATH (TestEnv): the offline stand-ins
// (WriteShims), or else python3 and python guards (WriteGuards); the rest
// of PATH the system's directories (Path); the variables in hardened
// cleared or fixed; bash without start-up files. test.sh runs in the
// image's WORKDIR, as Harbor runs it. PYTHONSAFEPATH is cleared rather
// than set, since every Python process of the tests would inherit it
// (`python run.py` could not import its sibling modules); pytest alone is
// kept from the working directory: the stand-ins run it isolated
// (python3 -I), the guards with -P (-I before Python 3.11), flags its
// subprocesses do not inherit. The interpreter guard (InterpreterGuard)
// is bound over each interpreter file itself for test.sh's command
// (sandbox.Cmd.StandIns, every python, python3 and python3.N in Path's
// directories), so a test.sh that names /usr/bin/python3 by its full
// path, a link to it or a venv's python gets the same -P. A task's declared services
// (harbor.Service) start before test.sh in the same sandbox. When test.sh
// exits non-zero without writing a result, Report.Explain keeps the end of
// its output and its last line in Problems.
package verifier
