package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/t1pipe/t1/infra/hostres"
)

// shellCtl is where the shell's control files appear inside the sandbox.
const shellCtl = "/run/t1"

// interruptGrace is how long an interrupted shell has to come back to its
// prompt before it is restarted.
const interruptGrace = 2 * time.Second

// shell is a persistent interactive bash. The protocol: for each Run the
// host writes the script to ctl/<n>.sh and sends bash one line,
//
//	exec 97>&1 98>&2; { eval "$(< /run/t1/<n>.sh)"; } </run/t1/<n>.in 1>&97 2>&98; printf '\n<mark>_done:%d\n' $?; printf '\n<mark>_done\n' >&2
//
// and reads stdout and stderr up to the marker lines. The script runs in
// the shell itself (so cd, variables and jobs persist) inside a group whose
// redirections bash undoes afterwards, so a script that closes stdout
// closes it only for itself. bash runs interactive (-i): SIGINT abandons
// the current line and returns to reading input, which is how a timed-out
// script is interrupted; the host then sends a second line that prints
// an "_intr" marker.
type shell struct {
	b    *box
	opts ShellOptions

	mu     sync.Mutex // serialises Run, restart and Close
	closed bool
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *markerReader
	errs   *markerReader
	n      int
	exited chan struct{} // closed when the shell process has exited
	token  string        // marker part: random, and unlike the sandbox id in no environment
}

// Shell implements Sandbox.
func (b *box) Shell(ctx context.Context, opts ShellOptions) (Shell, error) {
	s := &shell{b: b, opts: opts, token: newID()}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.kill()
		return nil, ErrClosed
	}
	b.shells[s] = struct{}{}
	b.mu.Unlock()
	return s, nil
}

func (s *shell) start(ctx context.Context) error {
	b := s.b
	dir := b.dir(s.opts.Dir)
	env := mergeEnv(b.baseEnv(), b.env, s.opts.Env, []string{"PS1=", "PS2=", "PS4=+ ", "HISTFILE=/dev/null"})
	cmd, err := b.l.command(b, b.wrap([]string{"/bin/bash", "--norc", "--noprofile", "--noediting", "-i"}), env, dir, "", nil)
	if err != nil {
		return err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = b.startTracked(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		stdin.Close()
		outR.Close()
		errR.Close()
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.stdin, s.exited = cmd, stdin, exited
	s.out, s.errs = newMarkerReader(outR), newMarkerReader(errR)
	// Settle: no history expansion, then a first marker so the start-up
	// chatter of an interactive bash without a terminal is discarded.
	s.n++
	mark := s.mark()
	init := "set +H; set +o history 2>/dev/null; PS1=; PS2=; PROMPT_COMMAND=\n" + s.markLine(mark, "done", "$?")
	s.out.expect(mark, newHeadTail(1024, nil))
	s.errs.expect(mark, newHeadTail(1024, nil))
	if _, err := io.WriteString(stdin, init); err != nil {
		s.kill()
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	for _, r := range []*markerReader{s.out, s.errs} {
		select {
		case ev := <-r.events:
			if ev.kind != "done" {
				s.kill()
				return errors.New("sandbox: shell: bash exited while starting")
			}
		case <-t.C:
			s.kill()
			return errors.New("sandbox: shell: bash did not start within 10s")
		case <-ctx.Done():
			s.kill()
			return ctx.Err()
		}
	}
	return nil
}

// mark is the current command's marker prefix; its random part keeps
// output from faking it.
func (s *shell) mark() string { return "__T1_" + s.token + "_" + strconv.Itoa(s.n) }

func (s *shell) markLine(mark, kind, status string) string {
	return fmt.Sprintf("printf '\\n%s_%s:%%d\\n' %s; printf '\\n%s_%s\\n' >&2\n", mark, kind, status, mark, kind)
}

// kill ends the shell's whole process tree.
func (s *shell) kill() {
	if s.cmd == nil {
		return
	}
	killTree(s.cmd)
	if s.b.l.name() == "process" {
		// A job the shell put in the background stays in its group, which
		// killTree has killed; one that called setsid carries the marker.
		for _, pid := range FindProcesses(s.b.id, -1) {
			if isDescendant(pid, s.cmd.Process.Pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	s.stdin.Close()
	s.out.close()
	s.errs.close()
	s.b.untrack(s.cmd)
	s.cmd = nil
}

// isDescendant reports whether pid's parent chain reaches ancestor.
func isDescendant(pid, ancestor int) bool {
	for range 64 {
		pp := ppid(pid)
		if pp <= 1 {
			return false
		}
		if pp == ancestor {
			return true
		}
		pid = pp
	}
	return false
}

func ppid(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name may hold spaces and parentheses: parse after the
	// last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 3 {
		return -1
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

func pgrp(pid int) int {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 3 {
		return -1
	}
	p, _ := strconv.Atoi(f[2])
	return p
}

// interrupt sends SIGINT to the shell's process group, as a terminal's
// Ctrl-C would: the foreground command and bash get it; background jobs of
// a shell without job control ignore it. Under bwrap the group is that of
// the sandbox's init (which ignores SIGINT), found below the bwrap process.
func (s *shell) interrupt() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	pid := s.cmd.Process.Pid
	if s.b.l.name() == "bwrap" {
		pid = bwrapInner(pid)
		if pid <= 0 {
			return
		}
	}
	if g := pgrp(pid); g > 0 {
		_ = syscall.Kill(-g, syscall.SIGINT)
	}
}

// bwrapInner returns the host pid of the sandbox's init: the child of the
// bwrap monitor process.
func bwrapInner(monitor int) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return -1
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid(pid) == monitor {
			return pid
		}
	}
	return -1
}

// Run implements Shell.
func (s *shell) Run(ctx context.Context, script string, opts RunOptions) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.b.isClosed() {
		return Result{}, ErrClosed
	}
	start := time.Now()
	var res Result
	// A shell that ended between commands (killed from inside, out of CPU
	// time) is replaced before the command runs, not after it was lost.
	restartedBefore := false
	if s.cmd != nil {
		select {
		case <-s.exited:
			s.kill()
			restartedBefore = true
		default:
		}
	}
	if s.cmd == nil {
		if err := s.start(ctx); err != nil {
			return Result{}, err
		}
	}
	s.n++
	mark := s.mark()
	sh := filepath.Join(s.b.ctlDir, strconv.Itoa(s.n)+".sh")
	in := filepath.Join(s.b.ctlDir, strconv.Itoa(s.n)+".in")
	if err := s.b.ctlFile(sh, strings.NewReader(script)); err != nil {
		return Result{}, err
	}
	defer s.b.ctlRemove(sh)
	stdinPath := "/dev/null"
	if opts.Stdin != nil {
		if err := s.b.ctlFile(in, opts.Stdin); err != nil {
			return Result{}, err
		}
		defer s.b.ctlRemove(in)
		stdinPath = s.ctlVisible(in)
	}
	stdout, stderr := newHeadTail(opts.MaxOutput, nil), newHeadTail(opts.MaxOutput, nil)
	s.out.expect(mark, stdout)
	s.errs.expect(mark, stderr)
	line := fmt.Sprintf("exec 97>&1 98>&2; { eval \"$(< %s)\"; } <%s 1>&97 2>&98; %s",
		shellQuote(s.ctlVisible(sh)), shellQuote(stdinPath), s.markLine(mark, "done", "$?"))
	if _, err := io.WriteString(s.stdin, line); err != nil {
		// The shell is gone; the readers report it below.
		_ = err
	}
	hostres.Point("sandbox.shell")

	timeout := s.b.timeout(opts.Timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	watch := s.b.watchDisk()
	defer watch.stop()

	status, kind, ctxErr := s.wait(ctx, timer.C, watch, &res)
	switch {
	case kind == "eof":
		s.kill()
		res.Restarted = true
		res.ExitCode = -1
		if status >= 0 {
			res.ExitCode = status
		}
	case kind == "intr":
		res.ExitCode = -1
	default:
		res.ExitCode = status
	}
	if !res.DiskExceeded {
		res.DiskExceeded = watch.final()
	}
	var t1, t2 bool
	res.Stdout, t1 = stdout.result()
	res.Stderr, t2 = stderr.result()
	res.Truncated = t1 || t2
	if restartedBefore {
		res.Restarted = true
		res.Stderr = "[t1 sandbox: the shell had ended since the last command and was restarted: working directory, variables and background jobs are lost; files remain]\n" + res.Stderr
	}
	if res.TimedOut {
		res.Stderr += fmt.Sprintf("\n[t1 sandbox: command timed out after %s and was interrupted]\n", timeout)
	}
	if res.DiskExceeded {
		res.Stderr += watch.notice()
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
	} else if watch.over() {
		res.Stderr += stillOver(watch)
	}
	if res.Restarted {
		res.Stderr += "\n[t1 sandbox: the shell ended or stopped responding and was restarted: working directory, variables and background jobs are lost; files remain]\n"
		if err := s.start(ctx); err != nil {
			return res, fmt.Errorf("sandbox: shell restart: %w", err)
		}
	}
	res.Duration = time.Since(start)
	if ctxErr != nil {
		return res, fmt.Errorf("sandbox: command interrupted: %w", ctxErr)
	}
	return res, nil
}

// wait waits for the command's markers on both streams, interrupting it
// on timeout, disk overrun or cancellation. kind is "done", "intr" or
// "eof" (the shell died or had to be killed).
func (s *shell) wait(ctx context.Context, timeout <-chan time.Time, watch *diskWatch, res *Result) (status int, kind string, ctxErr error) {
	var got [2]*markerEvent
	events := [2]chan markerEvent{s.out.events, s.errs.events}
	interrupted := false
	var grace <-chan time.Time
	status = -1
	for got[0] == nil || got[1] == nil {
		select {
		case ev := <-events[0]:
			got[0], events[0] = &ev, nil
		case ev := <-events[1]:
			got[1], events[1] = &ev, nil
		case <-timeout:
			res.TimedOut = true
			timeout = nil
		case <-watch.exceeded:
			res.DiskExceeded = true
			watch.exceeded = nil
		case <-ctx.Done():
			ctxErr = ctx.Err()
		case <-grace:
			return -1, "eof", ctxErr
		case <-s.exited:
			// The shell is gone, though a background job may hold its
			// pipes open: give the readers a moment for the last bytes.
			time.Sleep(20 * time.Millisecond)
			return exitCode(s.cmd, nil), "eof", ctxErr
		}
		if (res.TimedOut || res.DiskExceeded || ctxErr != nil) && !interrupted {
			interrupted = true
			s.interrupt()
			_, _ = io.WriteString(s.stdin, s.markLine(s.mark(), "intr", "130"))
			grace = time.After(interruptGrace)
		}
	}
	if got[0].kind == "eof" || got[1].kind == "eof" {
		// The streams closed: the shell is exiting; its status says how.
		select {
		case <-s.exited:
			return exitCode(s.cmd, nil), "eof", ctxErr
		case <-time.After(interruptGrace):
			return -1, "eof", ctxErr
		}
	}
	status = got[0].status
	kind = got[0].kind
	if interrupted && kind == "done" {
		// The command finished despite the interrupt; the "_intr" line was
		// queued and will print: consume it so it does not leak into the
		// next command's output.
		s.out.expectMore(s.mark())
		s.errs.expectMore(s.mark())
		deadline := time.After(interruptGrace)
		for _, ch := range []chan markerEvent{s.out.events, s.errs.events} {
			select {
			case ev := <-ch:
				if ev.kind == "eof" {
					return status, "eof", ctxErr
				}
			case <-deadline:
				return status, "eof", ctxErr
			}
		}
	}
	return status, kind, ctxErr
}

// ctlVisible is the path of a control file as the shell sees it.
func (s *shell) ctlVisible(p string) string {
	if s.b.l.name() == "bwrap" {
		return shellCtl + "/" + filepath.Base(p)
	}
	return p
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Close implements Shell.
func (s *shell) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.kill()
	s.b.mu.Lock()
	delete(s.b.shells, s)
	s.b.mu.Unlock()
	return nil
}

// maxHeld bounds the bytes a markerReader holds between commands.
const maxHeld = 256 << 10

// markerEvent is a marker line found in a stream, or its end.
type markerEvent struct {
	kind   string // "done", "intr" or "eof"
	status int
}

// markerReader reads one of the shell's output streams, sends the bytes
// before the current marker to the current sink and reports each marker.
// Bytes that arrive between commands (from background jobs) go to the
// next command's output.
type markerReader struct {
	r      *os.File
	events chan markerEvent

	mu      sync.Mutex
	prefix  []byte // "\n" + current marker + "_"
	sink    *headTail
	pending []byte
}

func newMarkerReader(r *os.File) *markerReader {
	m := &markerReader{r: r, events: make(chan markerEvent, 4), sink: newHeadTail(DefaultMaxOutput, nil)}
	go m.loop()
	return m
}

// expect sets the marker that ends the current output and where the
// output goes; bytes read since the last marker are moved to sink first.
func (m *markerReader) expect(mark string, sink *headTail) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, _ := m.sink.result(); old != "" {
		_, _ = sink.Write([]byte(old))
	}
	m.sink = sink
	m.prefix = []byte("\n" + mark + "_")
	m.scan()
}

// expectMore waits for a further marker of the same command, discarding
// what comes before it.
func (m *markerReader) expectMore(mark string) {
	m.expect(mark, newHeadTail(1024, nil))
}

func (m *markerReader) close() { m.r.Close() }

func (m *markerReader) loop() {
	buf := make([]byte, 64<<10)
	for {
		n, err := m.r.Read(buf)
		if n > 0 {
			m.mu.Lock()
			m.pending = append(m.pending, buf[:n]...)
			m.scan()
			m.mu.Unlock()
		}
		if err != nil {
			m.mu.Lock()
			_, _ = m.sink.Write(m.pending)
			m.pending = nil
			m.mu.Unlock()
			m.events <- markerEvent{kind: "eof", status: -1}
			return
		}
	}
}

// scan moves pending bytes to the sink up to a marker, which it reports.
// It keeps back a tail that could be the start of a marker. m.mu is held.
func (m *markerReader) scan() {
	for {
		if m.prefix == nil {
			// Between commands: hold the bytes for the next expect, which
			// may be waiting for a marker among them; past a bound, the
			// oldest go to the (bounded) sink.
			if len(m.pending) > maxHeld {
				cut := len(m.pending) - maxHeld
				_, _ = m.sink.Write(m.pending[:cut])
				m.pending = append(m.pending[:0], m.pending[cut:]...)
			}
			return
		}
		i := bytes.Index(m.pending, m.prefix)
		if i < 0 {
			keep := len(m.prefix) + 16
			if len(m.pending) > keep {
				cut := len(m.pending) - keep
				_, _ = m.sink.Write(m.pending[:cut])
				m.pending = append(m.pending[:0], m.pending[cut:]...)
			}
			return
		}
		nl := bytes.IndexByte(m.pending[i+len(m.prefix):], '\n')
		if nl < 0 {
			_, _ = m.sink.Write(m.pending[:i])
			m.pending = append(m.pending[:0], m.pending[i:]...)
			return
		}
		rest := string(m.pending[i+len(m.prefix) : i+len(m.prefix)+nl])
		_, _ = m.sink.Write(m.pending[:i])
		m.pending = append(m.pending[:0], m.pending[i+len(m.prefix)+nl+1:]...)
		kind, st, _ := strings.Cut(rest, ":")
		status := -1
		if st != "" {
			status, _ = strconv.Atoi(st)
		}
		m.prefix = nil
		m.sink = newHeadTail(DefaultMaxOutput, nil)
		m.events <- markerEvent{kind: kind, status: status}
	}
}
