package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Exec runs an external trainer (e.g. torchrun over the batch's Parquet)
// as a command. Each argument of Argv may contain placeholders:
//
//	{manifest}    a file holding the batch manifest JSON (schemas.BatchManifest)
//	{out}         the file the command must write its result to (Result as JSON)
//	{policy}      the object-store prefix of the current policy checkpoint
//	{checkpoint}  the object-store prefix the new checkpoint should go to
//	{version}     the new policy version
//
// The command succeeds by exiting 0 after writing {out}:
//
//	{"checkpoint": "<prefix or local directory>", "metrics": {"steps": 4, "policy_loss": …}}
//
// A non-zero exit, a missing or malformed result, or an empty checkpoint
// is a BadInputError carrying the exit status and the tail of stderr; the
// job's policy stays current.
type Exec struct {
	Argv []string
	// Dir is the working directory ("" = this process's).
	Dir string
	// Env is added to this process's environment.
	Env []string
	// TempDir holds the job files ("" = os.TempDir()).
	TempDir string
}

// Train implements Trainer.
func (e *Exec) Train(ctx context.Context, job Job) (*Result, error) {
	if len(e.Argv) == 0 {
		return nil, errors.New("exec trainer: no command configured")
	}
	dir, err := os.MkdirTemp(e.TempDir, "t1-train-")
	if err != nil {
		return nil, fmt.Errorf("exec trainer: %w", err)
	}
	defer os.RemoveAll(dir)
	mb, err := json.MarshalIndent(job.Manifest, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("exec trainer: manifest: %w", err)
	}
	manifest, out := filepath.Join(dir, "manifest.json"), filepath.Join(dir, "result.json")
	if err := os.WriteFile(manifest, append(mb, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("exec trainer: %w", err)
	}
	rep := strings.NewReplacer("{manifest}", manifest, "{out}", out, "{policy}", job.Policy,
		"{checkpoint}", job.Out, "{version}", strconv.FormatInt(job.Version, 10))
	argv := make([]string, len(e.Argv))
	for i, a := range e.Argv {
		argv[i] = rep.Replace(a)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), e.Env...)
	var stderr tail
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exec trainer %s: %w", argv[0], ctx.Err())
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, Bad(fmt.Errorf("exec trainer %s exited with status %d: %s", argv[0], ee.ExitCode(), stderr.String()))
		}
		return nil, Bad(fmt.Errorf("exec trainer %s: %w", argv[0], err))
	}
	rb, err := os.ReadFile(out)
	if err != nil {
		return nil, Bad(fmt.Errorf("exec trainer %s exited 0 but wrote no result file: %w", argv[0], err))
	}
	res, err := ParseResult(rb)
	if err != nil {
		return nil, Bad(fmt.Errorf("exec trainer %s: %w", argv[0], err))
	}
	return res, nil
}

// ParseResult decodes an external trainer's result file strictly (unknown
// fields are errors, so a misspelt metric is not silently dropped) and
// checks that it names a checkpoint and that its counts are not negative.
func ParseResult(b []byte) (*Result, error) {
	var res Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("result file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("result file: more than one JSON value")
	}
	if res.Checkpoint == "" {
		return nil, errors.New("result file names no checkpoint")
	}
	m := res.Metrics
	if m.Steps < 0 || m.Actions < 0 || m.RoutingMismatches < 0 || m.RoutingSets < 0 || m.LossDrift < 0 || m.RoutingMismatches > m.RoutingSets {
		return nil, fmt.Errorf("result file: impossible counts (steps %d, actions %d, routing mismatches %d of %d sets, loss drift %d)",
			m.Steps, m.Actions, m.RoutingMismatches, m.RoutingSets, m.LossDrift)
	}
	return &res, nil
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string { return strings.TrimSpace(string(t.b)) }
