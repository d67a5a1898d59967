package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
)

// Control and eval are single per run, not per log. While run rb is in
// progress with its control and eval in processes of their own, a second
// process of rb's control or eval, or one that would run eval for every
// run, exits 4 naming the holder; `t1 eval` of the finished run ra works
// meanwhile; and `t1 run` of rc, holding rc's control and eval, completes
// beside rb, which completes too.
func TestSerialStagesArePerRun(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	cfgOf := func(run string) string {
		return writeConfig(t, strings.Replace(equalPipeline, "  id: tiny\n", "  id: "+run+"\n", 1))
	}
	ra, rb, rc := cfgOf("ra"), cfgOf("rb"), cfgOf("rc")
	owner := serve(t, command(t, data, ra, "infra", "up"))
	waitOwner(t, data, owner.Process.Pid)
	completeRun(t, data, ra)

	// Run rb waits at synthesis, which no process runs yet.
	control := serve(t, command(t, data, rb, "worker", "--stage", "control", "--run", "rb"))
	eval := serve(t, command(t, data, rb, "worker", "--stage", "eval", "--run", "rb"))
	follow := command(t, data, rb, "run", "--no-stages", "--json", "--log-level", "warn")
	var followOut, followErr bytes.Buffer
	follow.Stdout, follow.Stderr = &followOut, &followErr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- follow.Wait() }()
	t.Cleanup(func() { follow.Process.Kill() })
	// A worker makes its consumer once it holds its lease.
	checkFor(t, time.Minute, func() error {
		st, err := readStatus(t, data, ra)
		if err != nil {
			return err
		}
		for _, c := range []string{"control_rb", "eval_rb"} {
			if !slices.Contains(st.consumers(), c) {
				return fmt.Errorf("no consumer %s yet: %v", c, st.consumers())
			}
		}
		if st.countOf("rb", "run.started") != 1 {
			return errors.New("rb not started yet")
		}
		return nil
	})

	for _, tc := range []struct {
		cfg    string
		args   []string
		holder *exec.Cmd
	}{
		{rb, []string{"worker", "--stage", "control", "--run", "rb", "--until-idle", "--idle", "1s"}, control.Cmd},
		{rb, []string{"worker", "--stage", "eval", "--until-idle", "--idle", "1s"}, eval.Cmd},
		{rb, []string{"run"}, control.Cmd},
		{rb, []string{"eval", "--run", "rb", "--policy", "v0", "--suite", "builtin"}, eval.Cmd},
	} {
		out, err := command(t, data, tc.cfg, append(tc.args, "--log-level", "warn")...).CombinedOutput()
		ee, ok := errors.AsType[*exec.ExitError](err)
		if !ok || ee.ExitCode() != 4 || !bytes.Contains(out, fmt.Appendf(nil, "pid %d ", tc.holder.Process.Pid)) {
			t.Fatalf("t1 %s beside the holder (pid %d): %v, want exit 4 naming it\n%s", strings.Join(tc.args, " "), tc.holder.Process.Pid, err, out)
		}
	}

	dir, err := filepath.Abs(filepath.Join("..", "harbor", "testdata", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	if sum, code := runEval(t, data, ra, false, "--run", "ra", "--policy", "v2", "--suite", dir, "--attempts", "1"); code != 0 || sum.Status != "completed" || sum.Scored != 3 {
		t.Fatalf("t1 eval of ra while rb runs elsewhere: exit %d, %+v; want 0, completed, 3 scored", code, sum)
	}

	// rc's process runs every stage; its shared ones carry rb on too.
	// It exits once rc completes, and rb's last events may come after
	// that: workers of the shared stages then carry rb to its end.
	completeRun(t, data, rc)
	select {
	case err := <-followed:
		if err != nil {
			t.Fatalf("following rb: %v\n%s", err, followErr.String())
		}
	case <-time.After(10 * time.Second):
		for _, stage := range []string{"synth", "audit", "sft", "rollout", "reward", "critic", "ppo"} {
			serve(t, command(t, data, rb, "worker", "--stage", stage, "--log-level", "warn"))
		}
		select {
		case err := <-followed:
			if err != nil {
				t.Fatalf("following rb: %v\n%s", err, followErr.String())
			}
		case <-time.After(5 * time.Minute):
			t.Fatalf("rb did not complete beside rc and the shared stages' workers: %s", followErr.String())
		}
	}
	var sum struct{ Status string }
	if err := json.Unmarshal(followOut.Bytes(), &sum); err != nil || sum.Status != "completed" {
		t.Fatalf("rb: %v %s", err, followOut.String())
	}
	st, err := readStatus(t, data, ra)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"ra", "rb", "rc"} {
		if st.countOf(run, "run.completed") != 1 || st.countOf(run, "eval.completed") == 0 {
			t.Errorf("run %s: %d run.completed, %d eval.completed", run, st.countOf(run, "run.completed"), st.countOf(run, "eval.completed"))
		}
	}
}

// served is a t1 process that serves until the test ends.
type served struct {
	*exec.Cmd
	stderr *bytes.Buffer
}

func serve(t *testing.T, cmd *exec.Cmd) served {
	t.Helper()
	s := served{cmd, &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	})
	return s
}
