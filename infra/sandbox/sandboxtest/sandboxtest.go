// Package sandboxtest is the conformance suite every sandbox backend
// passes: Run(t, backend) checks the API's contract (exec, shell state,
// timeouts, bounded output, upload/download, snapshot fidelity, cleanup)
// and, where the backend isolates, containment (host files, network,
// processes). Properties that do not apply to a backend are skipped with
// the reason.
package sandboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/sandbox"
)

// Run runs the conformance suite against backend. With -short it leaves
// out the cases that wait out timeouts or fill limits (seconds each), and
// keeps every check of the API's contract and of isolation.
func Run(t *testing.T, backend sandbox.Backend) {
	for _, c := range []struct {
		name string
		test func(*testing.T, sandbox.Backend)
		slow bool
	}{
		{"Exec", testExec, false},
		{"ExecEnvironmentScrubbed", testEnv, false},
		{"ExecTimeout", testExecTimeout, true},
		{"ExecBackgroundDiesWithCommand", testExecBackground, false},
		{"OutputBounded", testOutputBounded, true},
		{"NonUTF8AndClosedStdout", testOddOutput, false},
		{"ShellState", testShellState, false},
		{"ShellTimeout", testShellTimeout, true},
		{"ShellExitRestarts", testShellExit, true},
		{"ShellOddOutput", testShellOddOutput, false},
		{"UploadDownload", testUploadDownload, false},
		{"SnapshotRestore", testSnapshotRestore, false},
		{"Dockerfile", testDockerfile, false},
		{"DiskLimit", testDiskLimit, true},
		{"FileSizeLimit", testFileSizeLimit, false},
		{"CPUMemoryFilesLimits", testRlimits, true},
		{"ForkBomb", testForkBomb, true},
		{"HostFilesUnreachable", testHostFiles, false},
		{"NoNetwork", testNetwork, false},
		{"CloseKillsEverything", testClose, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.slow && testing.Short() {
				t.Skip("waits out a timeout or fills a limit: skipped with -short")
			}
			c.test(t, backend)
		})
	}
}

// Start starts a sandbox and closes it when the test ends.
func Start(t *testing.T, backend sandbox.Backend, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := backend.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func exec(t *testing.T, sb sandbox.Sandbox, c sandbox.Cmd) sandbox.Result {
	t.Helper()
	r, err := sb.Exec(context.Background(), c)
	if err != nil {
		t.Fatalf("Exec %q%q: %v", c.Args, c.Script, err)
	}
	return r
}

func script(t *testing.T, sb sandbox.Sandbox, s string) sandbox.Result {
	t.Helper()
	return exec(t, sb, sandbox.Cmd{Script: s, Timeout: 20 * time.Second})
}

func run(t *testing.T, sh sandbox.Shell, s string, timeout time.Duration) sandbox.Result {
	t.Helper()
	r, err := sh.Run(context.Background(), s, sandbox.RunOptions{Timeout: timeout})
	if err != nil {
		t.Fatalf("Shell.Run %q: %v", s, err)
	}
	return r
}

// sh maps a sandbox path to the path commands see (the host path under
// the plain backend).
func sh(sb sandbox.Sandbox, p string) string { return sb.Info().CommandPath(p) }

func testExec(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	r := exec(t, sb, sandbox.Cmd{Script: "echo out; echo err >&2; pwd; exit 3"})
	if r.ExitCode != 3 || r.Stdout != "out\n"+sh(sb, "/app")+"\n" || r.Stderr != "err\n" || r.TimedOut || r.Truncated {
		t.Errorf("result = %+v", r)
	}
	r = exec(t, sb, sandbox.Cmd{Args: []string{"cat"}, Stdin: strings.NewReader("fed\n"), Dir: "/tmp"})
	if r.ExitCode != 0 || r.Stdout != "fed\n" {
		t.Errorf("cat with stdin = %+v", r)
	}
	r = exec(t, sb, sandbox.Cmd{Args: []string{"pwd"}, Dir: "/tmp"})
	if r.Stdout != sh(sb, "/tmp")+"\n" {
		t.Errorf("pwd in /tmp = %q", r.Stdout)
	}
	script(t, sb, "mkdir -p "+sh(sb, "/app/sub"))
	r = exec(t, sb, sandbox.Cmd{Args: []string{"pwd"}, Dir: "sub"})
	if r.Stdout != sh(sb, "/app/sub")+"\n" {
		t.Errorf("pwd in the relative directory sub = %q", r.Stdout)
	}
	r = exec(t, sb, sandbox.Cmd{Args: []string{"no-such-command-t1"}})
	if r.ExitCode != 127 {
		t.Errorf("missing command: exit %d, want 127 (%+v)", r.ExitCode, r)
	}
	if _, err := sb.Exec(context.Background(), sandbox.Cmd{}); err == nil {
		t.Error("Exec of an empty Cmd succeeded")
	}
	info := sb.Info()
	if info.Backend != be.Name() || info.Reason == "" || info.ID == "" {
		t.Errorf("Info = %+v", info)
	}
	if info.Isolated {
		r = exec(t, sb, sandbox.Cmd{Script: "id -u; touch /tmp/by-1000; stat -c %u /tmp/by-1000", User: "1000"})
		if r.Stdout != "1000\n1000\n" {
			t.Errorf("User 1000: %+v", r)
		}
	} else if _, err := sb.Exec(context.Background(), sandbox.Cmd{Args: []string{"true"}, User: "1000"}); err == nil {
		t.Error("the plain backend accepted a User")
	}
}

func testEnv(t *testing.T, be sandbox.Backend) {
	t.Setenv("T1_SANDBOX_TEST_LEAK", "host-secret")
	sb := Start(t, be, sandbox.Spec{Env: map[string]string{"TASK_VAR": "task"}})
	r := exec(t, sb, sandbox.Cmd{Args: []string{"env"}, Env: []string{"CMD_VAR=cmd"}})
	got := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(r.Stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	if _, leak := got["T1_SANDBOX_TEST_LEAK"]; leak {
		t.Error("host environment leaked into the sandbox")
	}
	for k, want := range map[string]string{"TASK_VAR": "task", "CMD_VAR": "cmd", "LANG": "C.UTF-8", "HOME": sh(sb, "/root"), "T1_SANDBOX": sb.Info().ID,
		"GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	allowed := []string{"PATH", "HOME", "TERM", "LANG", "GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE", "T1_SANDBOX", "TASK_VAR", "CMD_VAR", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"}
	for k := range got {
		if !slices.Contains(allowed, k) {
			t.Errorf("unexpected variable %s=%q", k, got[k])
		}
	}
}

func testExecTimeout(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	for _, s := range []string{"while :; do :; done", "sleep 1000", "sleep 1000 & wait"} {
		start := time.Now()
		r := exec(t, sb, sandbox.Cmd{Script: s, Timeout: 300 * time.Millisecond})
		if !r.TimedOut || r.ExitCode != -1 || !strings.Contains(r.Stderr, "timed out") {
			t.Errorf("%q: result %+v, want a timeout", s, r)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%q: returned after %s", s, d)
		}
	}
	if r := script(t, sb, "echo still fine"); r.Stdout != "still fine\n" {
		t.Errorf("after timeouts: %+v", r)
	}
}

func testExecBackground(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	start := time.Now()
	r := script(t, sb, "sleep 1000 & sleep 1001 & echo started")
	if r.Stdout != "started\n" {
		t.Errorf("result %+v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Exec with a background job returned after %s", d)
	}
	if pids := sandbox.FindProcesses(sb.Info().ID, -1); len(pids) > 0 {
		t.Errorf("processes %v outlived their command", pids)
	}
}

func testOutputBounded(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	// A gigabyte of output costs a fixed amount of memory.
	r := exec(t, sb, sandbox.Cmd{Script: "echo first; head -c 1073741824 /dev/zero; echo; echo last", MaxOutput: 4096, Timeout: time.Minute})
	if r.ExitCode != 0 || !r.Truncated {
		t.Fatalf("1 GiB of output: exit %d truncated %v", r.ExitCode, r.Truncated)
	}
	if !strings.HasPrefix(r.Stdout, "first\n") || !strings.HasSuffix(r.Stdout, "\nlast\n") || len(r.Stdout) > 4096+100 {
		t.Errorf("kept %d bytes: head %q tail %q", len(r.Stdout), r.Stdout[:min(20, len(r.Stdout))], r.Stdout[max(0, len(r.Stdout)-20):])
	}
	if !strings.Contains(r.Stdout, "bytes omitted") {
		t.Error("no omission marker")
	}
}

func testOddOutput(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	r := script(t, sb, `printf '\xff\xfe\x00ok\x80'`)
	if r.Stdout != "\xff\xfe\x00ok\x80" {
		t.Errorf("non-UTF-8 output = %q", r.Stdout)
	}
	r = script(t, sb, "exec >&- 2>&-; sleep 0.2; exit 4")
	if r.ExitCode != 4 {
		t.Errorf("command that closes its output: %+v", r)
	}
}

func testShellState(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	s, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tmp := sh(sb, "/tmp")
	run(t, s, "cd "+tmp+"; X=41; f() { echo f$1; }; export Y=exported", 10*time.Second)
	r := run(t, s, "echo $((X+1)) $Y; f 1; pwd", 10*time.Second)
	if r.Stdout != "42 exported\nf1\n"+tmp+"\n" || r.ExitCode != 0 {
		t.Errorf("state did not carry: %+v", r)
	}
	run(t, s, "sleep 1000 & echo $! > "+tmp+"/job", 10*time.Second)
	r = run(t, s, "kill -0 $(cat "+tmp+"/job) && echo job alive; jobs | wc -l", 10*time.Second)
	if r.Stdout != "job alive\n1\n" {
		t.Errorf("background job did not carry: %+v", r)
	}
	r = run(t, s, "false", 10*time.Second)
	if r.ExitCode != 1 {
		t.Errorf("false: exit %d", r.ExitCode)
	}
	r, err = s.Run(context.Background(), "cat; echo", sandbox.RunOptions{Stdin: strings.NewReader("input")})
	if err != nil || r.Stdout != "input\n" {
		t.Errorf("stdin: %+v %v", r, err)
	}
	r = run(t, s, "printf 'no newline'", 10*time.Second)
	if r.Stdout != "no newline" {
		t.Errorf("output without newline = %q", r.Stdout)
	}
	s2, err := sb.Shell(context.Background(), sandbox.ShellOptions{Dir: "/logs/agent", Env: []string{"SESSION=two"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if r := run(t, s2, "pwd; echo $SESSION $X", 10*time.Second); r.Stdout != sh(sb, "/logs/agent")+"\ntwo\n" {
		t.Errorf("second shell with its own directory and environment: %+v", r)
	}
}

func testShellTimeout(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	s, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run(t, s, "V=kept", 10*time.Second)
	for _, c := range []string{"sleep 1000", "while :; do :; done", "cat /dev/zero | sleep 1000"} {
		r := run(t, s, c, 300*time.Millisecond)
		if !r.TimedOut || !strings.Contains(r.Stderr, "timed out") {
			t.Errorf("%q: %+v, want a timeout", c, r)
		}
		if r.Restarted {
			t.Errorf("%q: the shell was restarted; an interrupt should do", c)
		}
		if r := run(t, s, "echo $V", 10*time.Second); r.Stdout != "kept\n" {
			t.Errorf("after %q: %+v", c, r)
		}
	}
	// A command that ignores SIGINT cannot be interrupted: the shell is
	// restarted, with a notice.
	r := run(t, s, "trap '' INT; sleep 1000", 300*time.Millisecond)
	if !r.TimedOut || !r.Restarted || !strings.Contains(r.Stderr, "restarted") {
		t.Errorf("uninterruptible command: %+v", r)
	}
	if r := run(t, s, "echo fresh $V", 10*time.Second); r.Stdout != "fresh\n" {
		t.Errorf("after restart: %+v", r)
	}
}

func testShellExit(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	s, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run(t, s, "sleep 1000 &", 10*time.Second)
	r := run(t, s, "exit 7", 10*time.Second)
	if !r.Restarted || r.ExitCode != 7 {
		t.Errorf("exit 7: %+v", r)
	}
	if r := run(t, s, "echo back", 10*time.Second); r.Stdout != "back\n" {
		t.Errorf("after exit: %+v", r)
	}
	// A shell killed between commands (here by a job it left behind) is
	// replaced before the next command, which still runs.
	run(t, s, "(sleep 0.2; kill -9 $$) &", 10*time.Second)
	time.Sleep(time.Second)
	r = run(t, s, "echo ran", 10*time.Second)
	if r.Stdout != "ran\n" || !r.Restarted || !strings.Contains(r.Stderr, "restarted") {
		t.Errorf("command after the shell died: %+v", r)
	}
}

func testShellOddOutput(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{})
	s, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := run(t, s, `printf '\xff\xfe\x00ok\x80'`, 10*time.Second)
	if r.Stdout != "\xff\xfe\x00ok\x80" {
		t.Errorf("non-UTF-8 output = %q", r.Stdout)
	}
	r = run(t, s, "exec >&-; echo lost", 10*time.Second)
	if r.Stdout != "" || r.ExitCode == 0 {
		t.Errorf("closed stdout: %+v", r)
	}
	if r := run(t, s, "echo back", 10*time.Second); r.Stdout != "back\n" || r.Restarted {
		t.Errorf("after closing stdout: %+v", r)
	}
	r, err = s.Run(context.Background(), "head -c 67108864 /dev/zero; echo; echo end", sandbox.RunOptions{MaxOutput: 1024, Timeout: time.Minute})
	if err != nil || !r.Truncated || !strings.HasSuffix(r.Stdout, "\nend\n") || len(r.Stdout) > 1200 {
		t.Errorf("64 MiB in the shell: truncated %v, %d bytes kept, %v", r.Truncated, len(r.Stdout), err)
	}
	if r := run(t, s, "echo ok", 10*time.Second); r.Stdout != "ok\n" {
		t.Errorf("after large output: %+v", r)
	}
}

func testUploadDownload(t *testing.T, be sandbox.Backend) {
	ctx := context.Background()
	sb := Start(t, be, sandbox.Spec{})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.txt": "alpha", "sub/b.bin": "\x00\x01\xff", "sub/deeper/c": "c"})
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "sub/deeper/c"), 0o751); err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(ctx, src, "/tests"); err != nil {
		t.Fatal(err)
	}
	r := script(t, sb, "cd "+sh(sb, "/tests")+" && cat a.txt link && stat -c %a sub/deeper/c && echo new > made-inside")
	if r.Stdout != "alphaalpha751\n" || r.ExitCode != 0 {
		t.Errorf("uploaded tree seen from inside: %+v", r)
	}
	dst := filepath.Join(t.TempDir(), "back")
	if err := sb.Download(ctx, "/tests", dst); err != nil {
		t.Fatal(err)
	}
	want := treeOf(t, src)
	want["made-inside"] = "file 644 new\n"
	if got := treeOf(t, dst); !mapsEqual(got, want) {
		t.Errorf("downloaded tree:\n%v\nwant\n%v", got, want)
	}
	// A link planted inside the sandbox cannot make the host read or
	// write its own files.
	script(t, sb, "ln -s /etc "+sh(sb, "/app/etc")+"; ln -s /etc/hostname "+sh(sb, "/app/host")+"; mkdir -p "+sh(sb, "/app/d")+"; ln -s /etc/hostname "+sh(sb, "/app/d/x"))
	one := filepath.Join(t.TempDir(), "one")
	if err := os.WriteFile(one, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(ctx, one, "/app/etc/t1-should-not-exist"); err == nil {
		t.Error("Upload through a symbolic link to /etc succeeded")
	}
	if _, err := os.Stat("/etc/t1-should-not-exist"); err == nil {
		t.Error("Upload wrote /etc/t1-should-not-exist on the host")
	}
	got := filepath.Join(t.TempDir(), "host")
	if err := sb.Download(ctx, "/app/host", got); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(got); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("downloading a link: %v %v, want a link", fi, err)
	}
	if err := sb.Upload(ctx, one, "/etc/passwd"); err == nil {
		t.Error("Upload to /etc/passwd succeeded")
	}
}

func testSnapshotRestore(t *testing.T, be sandbox.Backend) {
	ctx := context.Background()
	task := t.TempDir()
	writeTree(t, task, map[string]string{
		"environment/setup.sh": `set -e
mkdir -p /app/dir/sub /app/gone/deep /app/keepdir
echo keep > /app/keep
echo delete-me > /app/del
echo old > /app/mod
echo f > /app/dir/sub/file
echo g > /app/gone/deep/g
echo x > /app/chm
echo was-file > /app/becomes-dir
mkdir /app/becomes-file; echo y > /app/becomes-file/y
ln -s keep /app/oldlink
echo cfg > /root/.cfg
`,
	})
	spec := sandbox.Spec{TaskDir: task}
	if !isolates(be) {
		// Under the plain backend the setup script sees host paths.
		spec.Env = nil
		fixPaths(t, filepath.Join(task, "environment/setup.sh"))
	}
	a := Start(t, be, spec)
	change := `set -e
cd /app
rm del; rm -r gone
echo new-contents >> mod
chmod 640 chm
printf '\x00\xffbinary' > bin; chmod 755 bin
mkdir -p empty/nested-empty
ln -s dir/sub/file newlink
ln -sfn dir oldlink
rm becomes-dir; mkdir becomes-dir; echo in > becomes-dir/in
rm -r becomes-file; echo now-file > becomes-file
head -c 3000000 /dev/urandom > big
rm /root/.cfg; echo tmp > /tmp/t
chmod 700 keepdir
`
	if !isolates(be) {
		change = strings.NewReplacer("/app", sh(a, "/app"), "/root", sh(a, "/root"), "/tmp", sh(a, "/tmp")).Replace(change)
	}
	if r := script(t, a, change); r.ExitCode != 0 {
		t.Fatalf("changes: %+v", r)
	}
	var layer bytes.Buffer
	if err := a.Snapshot(ctx, &layer); err != nil {
		t.Fatal(err)
	}
	names := layerNames(t, layer.Bytes())
	for _, want := range []string{"app/.wh.del", "app/.wh.gone", "root/.wh..cfg", "app/mod", "app/bin", "app/empty/", "app/empty/nested-empty/", "app/newlink", "app/chm", "tmp/t"} {
		if !slices.Contains(names, want) {
			t.Errorf("layer lacks %s; has %v", want, names)
		}
	}
	for _, unwanted := range []string{"app/keep", "app/dir/sub/file", "app/gone/deep/g", "app/.wh.keep"} {
		if slices.Contains(names, unwanted) {
			t.Errorf("layer has unchanged or covered entry %s", unwanted)
		}
	}
	b := Start(t, be, spec)
	if err := b.Restore(ctx, bytes.NewReader(layer.Bytes())); err != nil {
		t.Fatal(err)
	}
	ta, tb := treeOf(t, a.Info().Root+"/fs"), treeOf(t, b.Info().Root+"/fs")
	if !mapsEqual(ta, tb) {
		t.Errorf("restored state differs:\n%s", diff(ta, tb))
	}
	// Changed files keep their modification times.
	for _, f := range []string{"app/mod", "app/bin", "app/becomes-file"} {
		fa, errA := os.Stat(filepath.Join(a.Info().Root, "fs", f))
		fb, errB := os.Stat(filepath.Join(b.Info().Root, "fs", f))
		if errA != nil || errB != nil || !fa.ModTime().Equal(fb.ModTime()) {
			t.Errorf("%s: modification time not restored (%v, %v)", f, errA, errB)
		}
	}
	// The restored sandbox's own snapshot is the same change set.
	var again bytes.Buffer
	if err := b.Snapshot(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if got := layerNames(t, again.Bytes()); !slices.Equal(got, names) {
		t.Errorf("snapshot of the restored sandbox:\n%v\nwant\n%v", got, names)
	}
	// A hostile layer cannot write outside the sandbox's directories. On
	// an image root usr/evil is the sandbox's own /usr/evil, an addition
	// to its root (never the host's).
	for _, name := range []string{"../evil", "/etc/evil", "usr/evil", "app/../../evil"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
		_, _ = tw.Write([]byte("x"))
		_ = tw.Close()
		err := b.Restore(ctx, &buf)
		if name == "usr/evil" && err == nil && imageRoot(b) {
			r := script(t, b, "cat /usr/evil")
			if _, herr := os.Lstat("/usr/evil"); r.Stdout != "x" || herr == nil {
				t.Errorf("restore of usr/evil on an image root: the sandbox reads %q, the host's /usr/evil: %v", r.Stdout, herr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("restore of entry %q: %v, want an error naming it", name, err)
		}
	}
}

// imageRoot says whether sb runs on an image's overlay root, whose
// changes are in its layers.
func imageRoot(sb sandbox.Sandbox) bool {
	return strings.Contains(strings.Join(sb.Info().Notes, "\n"), "root filesystem: an image of")
}

func testDockerfile(t *testing.T, be sandbox.Backend) {
	ctx := context.Background()
	task := t.TempDir()
	writeTree(t, task, map[string]string{
		"environment/Dockerfile": `# a comment
FROM python:3.11-slim
ARG GREETING=hello
ENV APP_MODE=test \
    OTHER="two words"
WORKDIR /app/src
COPY main.py ./
COPY data/ /app/data/
COPY --chmod=755 run.sh /app/bin/run.sh
EXPOSE 8080
RUN echo "$GREETING $APP_MODE" > built.txt && \
    ls ../data > listing.txt
CMD ["python3", "main.py"]
`,
		"environment/main.py":     "print('hi')\n",
		"environment/data/x.csv":  "a,b\n",
		"environment/data/y.json": "{}\n",
		"environment/run.sh":      "#!/bin/sh\necho run\n",
	})
	// RUN uses relative paths only: the plain backend translates WORKDIR
	// and COPY, not paths inside commands.
	sb := Start(t, be, sandbox.Spec{TaskDir: task})
	notes := sb.Info().Notes
	if sb.Info().ImageLayers > 0 {
		// An image root says how it was made first.
		notes = notes[len(notes)-1:]
	}
	// The note says what the sandbox really runs on.
	root, whose := "the sandbox runs on the host's system directories", "the host's"
	if sb.Info().ImageLayers > 0 {
		root, whose = fmt.Sprintf("the sandbox runs on its image (%d layers), not on the host's system directories", sb.Info().ImageLayers), "the image's"
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "Dockerfile:2: FROM python:3.11-slim ignored: "+root) {
		t.Errorf("Info().Notes = %q, want the FROM note with %q", notes, root)
	}
	// A python image's python is the root's python3 where the root has no
	// python of its own.
	if r := script(t, sb, "test -e /usr/bin/python"); r.ExitCode != 0 {
		if r := script(t, sb, "python -c 'import sys; print(sys.version_info[0])'"); r.Stdout != "3\n" || sb.Info().Aliases["python"] != "/usr/bin/python3" || !strings.Contains(notes[0], "python runs "+whose+" /usr/bin/python3") {
			t.Errorf("python in a python image: %+v, aliases %v, notes %q", r, sb.Info().Aliases, sb.Info().Notes)
		}
	} else if len(sb.Info().Aliases) != 0 || strings.Contains(notes[0], "python runs") {
		t.Errorf("a root with its own python got an alias: %v, notes %q", sb.Info().Aliases, notes)
	}
	r := script(t, sb, "pwd; cat built.txt listing.txt main.py; echo $OTHER; "+sh(sb, "/app/bin/run.sh")+"; stat -c %a "+sh(sb, "/app/bin/run.sh"))
	want := sh(sb, "/app/src") + "\nhello test\nx.csv\ny.json\nprint('hi')\ntwo words\nrun\n755\n"
	if r.Stdout != want || r.ExitCode != 0 {
		t.Errorf("built environment:\n%q\nwant\n%q (%+v)", r.Stdout, want, r)
	}
	for _, tc := range []struct{ df, want string }{
		{"FROM x\nONBUILD RUN true\n", "Dockerfile:2: ONBUILD needs a container backend"},
		{"FROM x\nCOPY --from=builder /a /b\n", "Dockerfile:2: COPY --from=builder"},
		{"FROM x\nADD https://example.com/x /app/x\n", "Dockerfile:2: ADD https://example.com/x: fetching URLs"},
		{"FROM x\nUSER nobody\n", "Dockerfile:2: USER nobody"},
		{"FROM x\n\nRUN echo broken >&2; \\\n  exit 3\n", "Dockerfile:3: RUN echo broken >&2;   exit 3: exit code 3"},
		// The no-network hint only where the command installs packages:
		// it reads the command, so the install need not run (apt-get would
		// read the host's package lists, or fetch them where the backend
		// does not isolate).
		{"FROM x\nRUN python3 -c \"import sys; sys.exit(3)\"\n", "Dockerfile:2: RUN python3 -c \"import sys; sys.exit(3)\": exit code 3\n"},
		{"FROM x\nRUN exit 100; apt-get update && apt-get install -y t1-no-such-package\n", "exit code 100 (the sandbox has no network: package installs fail here)"},
		{"FROM x\nWORKDIR /opt/app\n", "Dockerfile:2: WORKDIR /opt/app"},
		{"FROM x\nCOPY missing.txt /app/\n", "Dockerfile:2: COPY missing.txt: not found"},
		{"FROM a\nFROM b\n", "Dockerfile:2: a second FROM"},
	} {
		bad := t.TempDir()
		writeTree(t, bad, map[string]string{"environment/Dockerfile": tc.df})
		_, err := be.Start(ctx, sandbox.Spec{TaskDir: bad})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dockerfile %q: error %v, want it to contain %q", tc.df, err, tc.want)
		}
		if strings.Contains(tc.want, "RUN echo broken") && err != nil && !strings.Contains(err.Error(), "broken") {
			t.Errorf("RUN failure does not carry the command's output: %v", err)
		}
	}
}

func testDiskLimit(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{Limits: sandbox.Limits{Disk: 32 << 20, FileSize: 8 << 20}})
	r := exec(t, sb, sandbox.Cmd{Script: "for i in $(seq 1 200); do head -c 4194304 /dev/zero > " + sh(sb, "/app") + "/f$i || exit 9; done; sleep 30", Timeout: time.Minute})
	if !r.DiskExceeded || !strings.Contains(r.Stderr, "disk limit exceeded") || r.ExitCode == 0 {
		t.Errorf("filling the disk: %+v", r)
	}
	// The next commands still run: one that adds nothing passes with a
	// reminder, and one that frees space passes.
	r = script(t, sb, "echo still")
	if r.Stdout != "still\n" || r.DiskExceeded || r.ExitCode != 0 || !strings.Contains(r.Stderr, "still over the disk limit") {
		t.Errorf("a command while over the limit: %+v", r)
	}
	r = script(t, sb, "rm -f "+sh(sb, "/app")+"/f*; echo freed")
	if r.Stdout != "freed\n" || r.DiskExceeded {
		t.Errorf("after freeing: %+v", r)
	}
	// In a shell the command is interrupted and the session survives.
	s, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run(t, s, "K=kept", 10*time.Second)
	r = run(t, s, "for i in $(seq 1 200); do head -c 4194304 /dev/zero > "+sh(sb, "/tmp")+"/f$i || break; done; sleep 30", time.Minute)
	if !r.DiskExceeded || !strings.Contains(r.Stderr, "disk limit exceeded") || r.ExitCode == 0 {
		t.Errorf("filling the disk from a shell: %+v", r)
	}
	want := "kept\n"
	if r.Restarted {
		want = "\n" // the interrupt took longer than the grace period
	}
	if r := run(t, s, "rm -f "+sh(sb, "/tmp")+"/f*; echo $K", 10*time.Second); r.Stdout != want || r.DiskExceeded {
		t.Errorf("shell after the overrun: %+v", r)
	}
}

func testFileSizeLimit(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{Limits: sandbox.Limits{FileSize: 1 << 20}})
	r := script(t, sb, "head -c 2097152 /dev/zero > "+sh(sb, "/app/big")+"; echo rc=$?; stat -c %s "+sh(sb, "/app/big"))
	if !strings.Contains(r.Stdout, "1048576") || strings.Contains(r.Stdout, "rc=0") {
		t.Errorf("file size limit: %+v", r)
	}
}

func testRlimits(t *testing.T, be sandbox.Backend) {
	sb := Start(t, be, sandbox.Spec{Limits: sandbox.Limits{CPUSeconds: 1, Memory: 256 << 20, OpenFiles: 40}})
	r := script(t, sb, "ulimit -t; ulimit -v; ulimit -n; ulimit -Ht; ulimit -St 5 2>/dev/null || echo cannot-raise")
	if r.Stdout != "1\n262144\n40\n1\ncannot-raise\n" {
		t.Errorf("limits seen inside: %q", r.Stdout)
	}
	// CPU: a busy loop is killed after a second of CPU time, long before
	// the wall clock (SIGKILL, as the soft limit equals the hard one; or
	// SIGXCPU).
	r = exec(t, sb, sandbox.Cmd{Script: "while :; do :; done", Timeout: time.Minute})
	if r.TimedOut || (r.ExitCode != 128+9 && r.ExitCode != 128+24) {
		t.Errorf("busy loop under a 1 s CPU limit: %+v", r)
	}
	// Memory: a 1 GiB allocation fails under a 256 MiB address space.
	r = script(t, sb, "python3 -c 'bytearray(1 << 30)' 2>&1 | tail -1")
	if !strings.Contains(r.Stdout, "MemoryError") {
		t.Errorf("1 GiB allocation under a 256 MiB limit: %+v", r)
	}
	// Open files: the 41st descriptor is refused.
	r = script(t, sb, "python3 -c 'import os\nfds=[]\ntry:\n  [fds.append(os.open(\"/dev/null\", 0)) for _ in range(100)]\nexcept OSError as e: print(\"refused\", len(fds) < 40)'")
	if r.Stdout != "refused True\n" {
		t.Errorf("open files under a limit of 40: %+v", r)
	}
}

func testForkBomb(t *testing.T, be sandbox.Backend) {
	if !isolates(be) && os.Geteuid() == 0 {
		t.Skip("the kernel exempts root from RLIMIT_NPROC, so the plain backend cannot contain a fork bomb when run as root")
	}
	sb := Start(t, be, sandbox.Spec{Limits: sandbox.Limits{Processes: 64}})
	if r := script(t, sb, "ulimit -u"); r.Stdout != "64\n" {
		t.Errorf("ulimit -u = %q, want 64", r.Stdout)
	}
	done := make(chan sandbox.Result, 1)
	go func() {
		r, _ := sb.Exec(context.Background(), sandbox.Cmd{Script: "bomb() { bomb | bomb & }; bomb; sleep 10", Timeout: 3 * time.Second})
		done <- r
	}()
	// While the bomb runs, count its processes from the host: the
	// sandbox's uid may hold at most the limit (the bwrap monitor
	// included).
	most := 0
	for range 10 {
		time.Sleep(200 * time.Millisecond)
		most = max(most, len(sandbox.FindProcesses(sb.Info().ID, -1)))
	}
	if most > 64+2 {
		t.Errorf("%d processes in the sandbox, limit 64", most)
	}
	if most < 32 {
		t.Errorf("only %d processes seen: the fork bomb did not run", most)
	}
	if r := <-done; !r.TimedOut {
		t.Errorf("fork bomb: %+v, want a timeout", r)
	}
	if pids := sandbox.FindProcesses(sb.Info().ID, -1); len(pids) > 0 {
		t.Errorf("fork bomb processes %v survived their command", pids)
	}
	// The host and the next sandbox are unaffected.
	next := Start(t, be, sandbox.Spec{})
	if r := script(t, next, "echo fine"); r.Stdout != "fine\n" {
		t.Errorf("next sandbox: %+v", r)
	}
}

func isolates(be sandbox.Backend) bool { return be.Name() != "process" }

func testHostFiles(t *testing.T, be sandbox.Backend) {
	if !isolates(be) {
		t.Skip("the plain backend does not isolate the host's files")
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := Start(t, be, sandbox.Spec{})
	r := script(t, sb, "cat "+secret+"; ls /work /home /opt /srv 2>&1 | head -3; cat /proc/1/environ | tr '\\0' '\\n' | grep -c T1_SANDBOX_TEST || true")
	if strings.Contains(r.Stdout, "host secret") {
		t.Errorf("a host file outside the sandbox was readable: %+v", r)
	}
	image := sb.Info().ImageLayers > 0
	for _, p := range []string{"/etc/t1-sandbox-probe", "/usr/t1-sandbox-probe", "/var/t1-sandbox-probe", "/t1-sandbox-probe", "/dev/t1-sandbox-probe", "/run/t1/probe", filepath.Dir(secret) + "/written"} {
		r := script(t, sb, "echo x > "+p+" && echo wrote")
		// On an image the root is the attempt's own writable layer: the
		// write lands there, never on the host, and no other sandbox sees it.
		inLayer := image && !strings.HasPrefix(p, "/dev/") && !strings.HasPrefix(p, "/run/t1/") && !strings.HasPrefix(p, filepath.Dir(secret))
		if strings.Contains(r.Stdout, "wrote") && !inLayer {
			t.Errorf("writing %s inside the sandbox succeeded", p)
		}
		if inLayer {
			other := Start(t, be, sandbox.Spec{})
			if r := script(t, other, "test -e "+p+" && echo seen"); strings.Contains(r.Stdout, "seen") {
				t.Errorf("%s written in one sandbox's layer was seen by another", p)
			}
		}
		if _, err := os.Stat(p); err == nil {
			t.Errorf("host path %s was created", p)
			os.Remove(p)
		}
	}
}

func testNetwork(t *testing.T, be sandbox.Backend) {
	if !isolates(be) {
		t.Skip("the plain backend shares the host's network")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	accepted := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted++
			mu.Unlock()
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	sb := Start(t, be, sandbox.Spec{})
	r := script(t, sb, fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected; python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(); c=socket.create_connection(s.getsockname()); print(\"loopback ok\")'", port))
	if strings.Contains(r.Stdout, "connected") {
		t.Errorf("the sandbox reached the host's loopback: %+v", r)
	}
	if !strings.Contains(r.Stdout, "loopback ok") {
		t.Errorf("the sandbox's own loopback does not work: %+v", r)
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if accepted != 0 {
		t.Errorf("the host listener accepted %d connections from the sandbox", accepted)
	}
}

func testClose(t *testing.T, be sandbox.Backend) {
	sb, err := be.Start(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	info := sb.Info()
	s, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, s, "sleep 1000 & setsid sleep 1002 & (sleep 1003 &) ; nohup sleep 1004 >/dev/null 2>&1 &", 10*time.Second)
	running := make(chan struct{})
	go func() {
		close(running)
		_, _ = sb.Exec(context.Background(), sandbox.Cmd{Script: "setsid sleep 1005 & sleep 1006", Timeout: time.Minute})
	}()
	<-running
	// A second shell is busy in a long command when Close comes.
	s2, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan time.Time, 1)
	go func() {
		_, _ = s2.Run(context.Background(), "sleep 1007", sandbox.RunOptions{Timeout: time.Minute})
		busy <- time.Now()
	}()
	time.Sleep(300 * time.Millisecond)
	if len(sandbox.FindProcesses(info.ID, -1)) < 4 {
		t.Fatalf("expected the sandbox's processes to be running, found %v", sandbox.FindProcesses(info.ID, -1))
	}
	closing := time.Now()
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case done := <-busy:
		if d := done.Sub(closing); d > 5*time.Second {
			t.Errorf("a running Shell.Run returned %s after Close", d)
		}
	case <-time.After(10 * time.Second):
		t.Error("a running Shell.Run did not return after Close")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := sandbox.FindProcesses(info.ID, -1)
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Close, processes %v remain", pids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(info.Root); err == nil {
		t.Errorf("after Close, %s remains", info.Root)
	}
	if _, err := sb.Exec(context.Background(), sandbox.Cmd{Script: "true"}); err == nil {
		t.Error("Exec after Close succeeded")
	}
	if err := sb.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// writeTree creates files (parents included) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fixPaths rewrites sandbox paths in a setup script for the plain backend,
// which runs it with HOME and the work directory mapped: /app becomes
// "$PWD/../../app" relative to the build directory.
func fixPaths(t *testing.T, p string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := "FS=$(cd ../.. && pwd)\n" + string(data)
	s = strings.ReplaceAll(s, "/app", "$FS/app")
	s = strings.ReplaceAll(s, "/root", "$FS/root")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeOf describes every path under dir: type, mode, and content (or its
// hash), link target or nothing.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := fmt.Sprintf("%o", info.Mode().Perm()|info.Mode()&(fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid))
		switch {
		case info.IsDir():
			out[rel] = "dir " + mode
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc := string(data)
			if len(data) > 64 {
				h := sha256.Sum256(data)
				desc = hex.EncodeToString(h[:])
			}
			out[rel] = fmt.Sprintf("file %s %s", mode, desc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func diff(a, b map[string]string) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var ks []string
	for k := range keys {
		if a[k] != b[k] {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	var s strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&s, "%s: snapshotted %q, restored %q\n", k, a[k], b[k])
	}
	return s.String()
}

func layerNames(t *testing.T, layer []byte) []string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	return names
}
