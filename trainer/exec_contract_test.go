package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
)

// keyPaths lists every object key of a JSON document, as dotted paths
// (array elements share the path of their array), so two documents of
// one contract compare by shape whatever their values. schema_versions is
// a map from table to version, its keys data.
func keyPaths(t *testing.T, b []byte) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	var walk func(string, any)
	walk = func(at string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				set[at+"."+k] = true
				if k != "schema_versions" {
					walk(at+"."+k, e)
				}
			}
		case []any:
			for _, e := range x {
				walk(at+"[]", e)
			}
		}
	}
	walk("", v)
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The exec contract as doc.go shows it: the example job and result files
// (testdata/exec, quoted in doc.go line for line) have the shape of what
// Exec writes and reads, and every job carries its kind's
// hyperparameters, defaults filled in.
func TestExecContractExample(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	man, _ := sampled(t, st, m)
	doc, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	captured := t.TempDir()
	opt := ReferenceOptions{Actor: ActorOptions{Epochs: 2, Minibatches: 4, Clip: 0.2, NormalizeAdvantages: true,
		Adam: moe.AdamConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, MaxGradNorm: 1, Replay: true}}
	tr, err := New(st, Options{Backend: BackendExec, Reference: opt, Exec: Exec{Argv: []string{"sh", "-c",
		`cp "$0" "$2/$3-job.json"; cp "$2/$3-result.json" "$1"`, "{job}", "{out}", captured, "{kind}"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []Kind{KindActor, KindCritic, KindSFT} {
		want := map[string][]byte{}
		for _, f := range []string{"job", "result"} {
			b, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "testdata", "exec", string(kind)+"-"+f+".json"))
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if !bytes.Contains(doc, []byte("//\t"+line+"\n")) {
					t.Errorf("doc.go does not quote %s-%s.json's line %q", kind, f, line)
				}
			}
			want[f] = b
		}
		// The stand-in answers with the example result.
		if err := os.WriteFile(filepath.Join(captured, string(kind)+"-result.json"), want["result"], 0o644); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case KindActor:
			// An actor job's batch has its values (only the shape matters here).
			withValues := *man
			withValues.ValueFiles = man.RewardFiles
			_, err = tr.TrainActor(ctx, ActorJob{Manifest: &withValues, Policy: keys.Policy(run, 2), Out: keys.Policy(run, 3), Version: 3})
		case KindCritic:
			_, err = tr.TrainCritic(ctx, CriticJob{Manifest: man, Critic: keys.Critic(run, 2), Out: keys.Critic(run, 3), Version: 3, GAE: GAE{Gamma: 1, Lambda: 0.95}})
		case KindSFT:
			_, err = tr.TrainSFT(ctx, SFTJob{Run: run, Data: man.TokenFiles, Steps: 20, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
		}
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		got, err := os.ReadFile(filepath.Join(captured, string(kind)+"-job.json"))
		if err != nil {
			t.Fatal(err)
		}
		var job JobFile
		if err := strict(got, &job); err != nil {
			t.Fatal(err)
		}
		if g, w := keyPaths(t, got), keyPaths(t, want["job"]); !reflect.DeepEqual(g, w) {
			t.Errorf("%s job file has keys\n%v\nthe example\n%v", kind, g, w)
		}
		h := job.Hyperparameters
		switch kind {
		case KindActor:
			if h.Actor == nil || !reflect.DeepEqual(*h.Actor, opt.Actor) || h.Critic != nil || h.SFT != nil {
				t.Errorf("actor job's hyperparameters %+v", h)
			}
		case KindCritic:
			if h.Critic == nil || h.Critic.Epochs != 1 || h.Critic.Adam != moe.DefaultAdam() || h.Actor != nil {
				t.Errorf("critic job's hyperparameters (defaults filled in) %+v", h)
			}
		case KindSFT:
			if h.SFT == nil || h.SFT.Adam != moe.DefaultAdam() || h.Actor != nil {
				t.Errorf("sft job's hyperparameters %+v", h)
			}
		}
		if h.Temperature != TemperaturePerToken {
			t.Errorf("%s: temperature %q", kind, h.Temperature)
		}
	}
}
