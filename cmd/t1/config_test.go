package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/t1pipe/t1/config"
)

// t1 config defaults prints the built-in configuration: its YAML reads
// back as config.Default, and --json holds the same keys.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	out, err := t1(t, "config", "defaults")
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse("defaults.yaml", []byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, config.Default()) {
		t.Errorf("printed defaults read back as %+v", got)
	}
	out, err = t1(t, "config", "defaults", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Stages struct {
			Control struct {
				PoolTarget int `json:"pool_target"`
			} `json:"control"`
			Rollout struct {
				CommandTimeout string `json:"command_timeout"`
			} `json:"rollout"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := config.Default().Stages
	if j.Stages.Control.PoolTarget != d.Control.PoolTarget || j.Stages.Rollout.CommandTimeout != d.Rollout.CommandTimeout.String() {
		t.Errorf("JSON %+v, want pool_target %d and command_timeout %s", j, d.Control.PoolTarget, d.Rollout.CommandTimeout)
	}
}
