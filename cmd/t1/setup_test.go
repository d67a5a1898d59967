package main

import (
	"context"
	"strings"
	"testing"

	"github.com/t1pipe/t1/exit"
)

// --setup selects a setup of the configuration file for any command; an
// unknown name is a configuration error (exit 2) naming the configured
// ones.
func TestSetupFlag(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `run: {id: base}
setups:
  - name: long
    set: {run.id: base-long, stages.control.iterations: 9}
`)
	c, err := (&globals{configPath: cfg, setup: "long"}).load()
	if err != nil || c.Run.ID != "base-long" || c.Stages.Control.Iterations != 9 {
		t.Fatalf("setup long: %v %+v", err, c.Run)
	}
	_, err = t1(t, "status", "--data", t.TempDir(), "--config", cfg, "--setup", "short")
	if got := exit.Code(context.Background(), err); got != exit.Config || !strings.Contains(exit.Line(err), `no setup "short" (configured: long)`) {
		t.Fatalf("unknown setup: exit %d, %v", got, err)
	}
}
