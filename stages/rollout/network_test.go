package rollout

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/hostfeature"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trial"
)

// An attempt with network registries records every request its sandbox
// made through the proxy in rollout.completed: the allowed one and the
// refused one; an attempt without network records none.
func TestRolloutRecordsEgress(t *testing.T) {
	bw := testinfra.Bubblewrap(t)
	hostfeature.Require(t, hostfeature.Root())
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the task's solution uses it")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "pkg") }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "no") }))
	defer other.Close()
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	tk, err := harbor.NewBuilder("fetch").Instruction("Fetch the package to /app/pkg.\n").
		Solution(fmt.Sprintf("#!/bin/bash\nNO_PROXY= no_proxy= curl -s %s/pkg -o /app/pkg\nNO_PROXY= no_proxy= curl -s %s/x\n", srv.URL, other.URL)).
		TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, registries := range [][]string{{strings.TrimPrefix(srv.URL, "http://")}, nil} {
		st := testinfra.FreshStore(t)
		if _, _, _, err := trial.PutBundle(context.Background(), st, storeRun, "fetch", tk); err != nil {
			t.Fatal(err)
		}
		stage := NewStage(StageConfig{
			Store: st, Trial: trial.Options{Backend: bw, Registries: registries}, Episode: agent.Config{MaxTurns: 4},
			Policies: func(context.Context, string, int64) (Policy, error) { return Policy{Tokenizer: tok}, nil },
			TempDir:  t.TempDir(),
		})
		req := schemas.RolloutRequestedPayload{TaskID: "fetch", Purpose: "sft", Seed: 1}
		rec := &testinfra.Recorder{Run: storeRun}
		if err := stage.Handle(context.Background(), testinfra.RootEvent(t, storeRun, schemas.RolloutRequested, "fetch", req), rec); err != nil {
			t.Fatal(err)
		}
		p := completed(t, rec.Events)
		if registries == nil {
			if p.Network != "" || len(p.Egress) != 0 {
				t.Errorf("network none: %q %+v", p.Network, p.Egress)
			}
			continue
		}
		if p.Network != "registries" || len(p.Egress) != 2 || !p.Egress[0].Allowed || p.Egress[0].Bytes != 3 ||
			p.Egress[1].Allowed || !strings.Contains(p.Egress[1].Reason, "allow-list") {
			t.Errorf("network registries: %q %+v", p.Network, p.Egress)
		}
	}
}
