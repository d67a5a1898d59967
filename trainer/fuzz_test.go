package trainer

import (
	"strings"
	"testing"
)

func TestParseResult(t *testing.T) {
	res, err := ParseActorResult([]byte(`{"checkpoint":"runs/r/policy/v000002","metrics":{"steps":2,"logprob_gap":0.01,"routing_sets":10,"routing_mismatches":0,"replay":true}}`))
	if err != nil || res.Checkpoint != "runs/r/policy/v000002" || res.Metrics.Steps != 2 || !res.Metrics.Replay {
		t.Fatalf("%+v %v", res, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"metrics":{}}`, "names no checkpoint"},
		{`{"checkpoint":"c","metrics":{"stpes":2}}`, `unknown field "stpes"`},
		{`{"checkpoint":"c"} {"checkpoint":"d"}`, "more than one"},
		{`{"checkpoint":"c","metrics":{"routing_mismatches":3,"routing_sets":2}}`, "impossible counts"},
		{`{"checkpoint":`, "unexpected EOF"},
		{`{"kind":"critic","checkpoint":"c"}`, `answers a job of kind "critic", not "actor"`},
		{`{"checkpoint":"c","values":[]}`, "holds values"},
	} {
		if _, err := ParseActorResult([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
	if res, err := ParseActorResult([]byte(`{"kind":"actor","checkpoint":"c"}`)); err != nil || res.Checkpoint != "c" {
		t.Errorf("actor result naming its kind: %+v %v", res, err)
	}
}

func TestParseCriticAndSFTResults(t *testing.T) {
	c, err := ParseCriticResult([]byte(`{"kind":"critic","checkpoint":"/tmp/critic","values":[{"task_id":"t","attempt":1,"chunk":0,"values":[0,0.25],"advantages":[0,1.5],"returns":[0,1.75]}],
		"metrics":{"steps":1,"warmup":true,"warmup_steps":3,"explained_variance":-0.5,"value_loss":0.125}}`))
	if err != nil || c.Checkpoint != "/tmp/critic" || len(c.Values) != 1 || c.Values[0].Attempt != 1 || c.Values[0].Returns[1] != 1.75 ||
		c.Metrics != (CriticMetrics{Steps: 1, Warmup: true, WarmupSteps: 3, ExplainedVariance: -0.5, ValueLoss: 0.125}) {
		t.Fatalf("%+v %v", c, err)
	}
	s, err := ParseSFTResult([]byte(`{"kind":"sft","checkpoint":"runs/r/policy/v000001","metrics":{"steps":6,"sequences":2,"first_loss":3.5,"loss":2}}`))
	if err != nil || s.Checkpoint != "runs/r/policy/v000001" || s.Metrics != (SFTMetrics{Steps: 6, Sequences: 2, FirstLoss: 3.5, Loss: 2}) {
		t.Fatalf("%+v %v", s, err)
	}
	for _, tc := range []struct {
		parse func([]byte) error
		in    string
		want  string
	}{
		{criticParse, `{"checkpoint":"c","values":[{"task_id":"t"}]}`, `answers a job of kind "", not "critic"`},
		{criticParse, `{"kind":"critic","checkpoint":"c"}`, "holds no values"},
		{criticParse, `{"kind":"critic","checkpoint":"c","values":[{"task_id":"t","vals":[1]}]}`, `unknown field "vals"`},
		{criticParse, `{"kind":"critic","checkpoint":"c","values":[{}],"metrics":{"explained_variance":2}}`, "impossible metrics"},
		{sftParse, `{"kind":"sft","checkpoint":"c","metrics":{"steps":1,"policy_loss":1}}`, `unknown field "policy_loss"`},
		{sftParse, `{"kind":"sft","checkpoint":"c","values":[]}`, "holds values"},
		{sftParse, `{"kind":"actor","checkpoint":"c"}`, `not "sft"`},
		{sftParse, `{"kind":"sft","checkpoint":"c","metrics":{"sequences":-1}}`, "impossible counts"},
	} {
		if err := tc.parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.in, err, tc.want)
		}
	}
}

func criticParse(b []byte) error { _, err := ParseCriticResult(b); return err }
func sftParse(b []byte) error    { _, err := ParseSFTResult(b); return err }

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
		res, err := ParseActorResult(b)
		if err != nil {
			return
		}
		if res.Checkpoint == "" || res.Metrics.RoutingMismatches > res.Metrics.RoutingSets || res.Metrics.Steps < 0 {
			t.Fatalf("accepted %q as %+v", b, res)
		}
	})
}
