package trainer

import (
	"strings"
	"testing"
)

func TestParseResult(t *testing.T) {
	res, err := ParseResult([]byte(`{"checkpoint":"runs/r/policy/v000002","metrics":{"steps":2,"logprob_gap":0.01,"routing_sets":10,"routing_mismatches":0,"replay":true}}`))
	if err != nil || res.Checkpoint != "runs/r/policy/v000002" || res.Metrics.Steps != 2 || !res.Metrics.Replay {
		t.Fatalf("%+v %v", res, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"metrics":{}}`, "names no checkpoint"},
		{`{"checkpoint":"c","metrics":{"stpes":2}}`, `unknown field "stpes"`},
		{`{"checkpoint":"c"} {"checkpoint":"d"}`, "more than one"},
		{`{"checkpoint":"c","metrics":{"routing_mismatches":3,"routing_sets":2}}`, "impossible counts"},
		{`{"checkpoint":`, "unexpected EOF"},
	} {
		if _, err := ParseResult([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseResult: no input panics, and an accepted result always names
// a checkpoint and has consistent counts.
func FuzzParseResult(f *testing.F) {
	for _, s := range []string{
		`{"checkpoint":"runs/r/policy/v000002","metrics":{"steps":2,"actions":80,"policy_loss":-0.1,"clip_fraction":0.1,"approx_kl":0.001,"grad_norm":0.8,"logprob_gap":0.0006,"logprob_gap_max":0.002,"routing_mismatches":0,"routing_sets":210,"mismatch_rate":0,"loss_drift":0,"replay":true}}`,
		`{"checkpoint":"/tmp/ckpt"}`, `{}`, `null`, `[]`, `{"checkpoint":1}`, `{"checkpoint":"c","metrics":{"steps":-1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ParseResult(b)
		if err != nil {
			return
		}
		if res.Checkpoint == "" || res.Metrics.RoutingMismatches > res.Metrics.RoutingSets || res.Metrics.Steps < 0 {
			t.Fatalf("accepted %q as %+v", b, res)
		}
	})
}
