package moe

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// t1's model is transformers' Qwen3MoeForCausalLM (and, as a critic,
// Qwen3MoeForTokenClassification with one label), checked against
// transformers itself (testdata/qwen3_moe_reference.py, run by the
// project's Python environment): for a table of shapes, checkpoints
// transformers writes — float32, bfloat16, float16, sharded — load in t1
// and give the same log-probs (or values) within 1e-5, the same top-k
// expert sets, and the same gradients of a loss within 1e-4 of the
// largest; the checkpoints t1 writes from them load strictly in
// transformers and compute what t1 computes.
func TestMatchesTransformers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs transformers: about 20 s")
	}
	py := testinfra.Python(t)
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]any{"vocab_size": 520, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
		"head_dim": 12, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16, "max_position_embeddings": 128,
		"rope_theta": 10000.0, "rms_norm_eps": 1e-6, "norm_topk_prob": true, "tie_word_embeddings": false}
	with := func(kv ...any) map[string]any {
		c := map[string]any{}
		for k, v := range base {
			c[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			c[kv[i].(string)] = kv[i+1]
		}
		return c
	}
	type tcase struct {
		name, kind, dtype, shard string
		cfg                      map[string]any
	}
	cases := []tcase{
		{"gqa 2, head_dim 12, normalised top-k", "policy", "float32", "", base},
		{"no gqa, head_dim = hidden/heads, unnormalised, tied", "policy", "float32", "",
			with("num_key_value_heads", 4, "head_dim", 8, "norm_topk_prob", false, "tie_word_embeddings", true, "rope_theta", 1e6, "rms_norm_eps", 1e-5)},
		{"gqa 4, three layers, top-3 of 6", "policy", "float32", "",
			with("num_attention_heads", 8, "num_key_value_heads", 2, "head_dim", 6, "num_hidden_layers", 3, "num_experts", 6, "num_experts_per_tok", 3,
				"rope_theta", 5e5, "rms_norm_eps", 1e-5, "norm_topk_prob", false)},
		{"bfloat16, sharded", "policy", "bfloat16", "40KB", base},
		{"float16, sharded, tied", "policy", "float16", "40KB", with("tie_word_embeddings", true, "norm_topk_prob", false)},
		{"critic", "critic", "float32", "", with("norm_topk_prob", false)},
	}
	work := t.TempDir()
	var inits []map[string]any
	for i, c := range cases {
		job := map[string]any{"op": "init", "config": c.cfg, "seed": 11 + i, "dir": filepath.Join(work, fmt.Sprint(i), "hf"), "kind": c.kind, "dtype": c.dtype}
		if c.shard != "" {
			job["max_shard_size"] = c.shard
		}
		inits = append(inits, job)
	}
	for i, r := range runReference(t, py, inits) {
		if r.Error != "" {
			t.Fatalf("%s: transformers: %s", cases[i].name, r.Error)
		}
		if sharded := slices.Contains(r.Files, WeightsIndexFile); sharded != (cases[i].shard != "") {
			t.Fatalf("%s: files %v", cases[i].name, r.Files)
		}
	}

	// t1 loads each (with its tokenizer beside it, as a model directory
	// has one), runs it, and writes it as its own checkpoint.
	type run struct {
		ids     []int
		d       []float32
		out     []float32 // log-probs or values
		routing Routing
		grads   map[string][]float32
		ownDir  string
		model   *Model
	}
	tf, err := tokenizerFiles(tok)
	if err != nil {
		t.Fatal(err)
	}
	runs := make([]run, len(cases))
	var forwards []map[string]any
	for i, c := range cases {
		hf := inits[i]["dir"].(string)
		for name, b := range tf {
			if err := os.WriteFile(filepath.Join(hf, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ck, err := LoadDir(hf)
		if err != nil {
			t.Fatalf("%s: t1 does not load transformers' checkpoint: %v", c.name, err)
		}
		wantHead := map[string]Head{"policy": LMHead, "critic": ScoreHead}[c.kind]
		if ck.Model.Head != wantHead {
			t.Fatalf("%s: head %d", c.name, ck.Model.Head)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 5))
		r := run{model: ck.Model, ownDir: filepath.Join(work, fmt.Sprint(i), "t1")}
		for range 24 {
			r.ids = append(r.ids, rng.IntN(ck.Model.Cfg.Vocab))
		}
		n := len(r.ids) - 1
		if c.kind == "critic" {
			n++
		}
		for range n {
			r.d = append(r.d, float32(rng.NormFloat64()))
		}
		if err := ck.SaveDir(r.ownDir); err != nil {
			t.Fatal(err)
		}
		runs[i] = r
		for _, dir := range []string{hf, r.ownDir} {
			job := map[string]any{"op": "forward", "dir": dir, "kind": c.kind, "ids": r.ids}
			if c.kind == "critic" {
				job["dvalues"] = r.d
			} else {
				job["dlogprobs"] = r.d
			}
			forwards = append(forwards, job)
		}
	}
	refs := runReference(t, py, forwards)

	for i, c := range cases {
		r := &runs[i]
		for j, ref := range refs[2*i : 2*i+2] {
			from := []string{"transformers' checkpoint", "t1's checkpoint"}[j]
			if ref.Error != "" {
				t.Fatalf("%s: transformers on %s: %s", c.name, from, ref.Error)
			}
			m := r.model
			// Forward with the reference's expert sets, so that a near-tie
			// rounding flips cannot make the rest of the sequence differ;
			// the live choice is compared wherever it is not a near-tie.
			replay := NewRouting(len(r.ids), m.Cfg.Layers, m.Cfg.TopK)
			for tk := range r.ids {
				for l := 0; l < m.Cfg.Layers; l++ {
					for k, e := range ref.Experts[tk][l] {
						replay.At(tk, l)[k] = int32(e)
					}
				}
			}
			p, err := m.Forward(r.ids, ForwardOptions{Replay: &replay})
			if err != nil {
				t.Fatal(err)
			}
			got, want := p.LogProbs, ref.LogProbs
			if c.kind == "critic" {
				got, want = p.Values, ref.Values
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d outputs, transformers %d", c.name, len(got), len(want))
			}
			worst := 0.0
			for k := range got {
				worst = max(worst, math.Abs(float64(got[k])-want[k]))
			}
			if worst > 1e-5 {
				t.Errorf("%s (%s): outputs differ from transformers' by up to %.3g", c.name, from, worst)
			}
			flips, near := 0, 0
			for tk := range r.ids {
				for l := 0; l < m.Cfg.Layers; l++ {
					live := slices.Clone(p.LiveRouting.At(tk, l))
					slices.Sort(live)
					if ref.Margins[tk][l] < 1e-5 {
						near++
						continue
					}
					if !slices.Equal(live, replay.At(tk, l)) {
						flips++
					}
				}
			}
			if flips > 0 || near > len(r.ids)*m.Cfg.Layers/10 {
				t.Errorf("%s (%s): %d expert sets differ from transformers' (%d near-ties skipped)", c.name, from, flips, near)
			}
			m.ZeroGrad()
			var dl, dv []float32
			if c.kind == "critic" {
				dv = r.d
			} else {
				dl = r.d
			}
			if err := m.Backward(p, dl, dv); err != nil {
				t.Fatal(err)
			}
			if len(ref.Grads) != len(m.G.Tensors) {
				t.Fatalf("%s: transformers has %d gradients, t1 %d tensors", c.name, len(ref.Grads), len(m.G.Tensors))
			}
			for _, g := range m.G.Tensors {
				rg, ok := ref.Grads[g.Name]
				if !ok || len(rg) != len(g.Data) {
					t.Fatalf("%s: transformers has no gradient %s of %d values", c.name, g.Name, len(g.Data))
				}
				var scale, diff float64
				for k, v := range rg {
					scale = max(scale, math.Abs(v))
					diff = max(diff, math.Abs(float64(g.Data[k])-v))
				}
				if diff > 1e-4*scale {
					t.Errorf("%s (%s): gradient %s differs by %.3g of a largest %.3g", c.name, from, g.Name, diff, scale)
				}
			}
			if j == 0 {
				t.Logf("%s: outputs within %.2g, %d near-ties", c.name, worst, near)
			}
		}
		if c.kind == "policy" {
			sampleAndTrain(t, c.name, r.model, r.ids)
		}
	}
}

// sampleAndTrain samples from m at bf16 with its routing recorded, checks
// that replaying that routing in the trainer leaves no mismatch, and
// that a few supervised steps on the sample raise its log-likelihood:
// what the pipeline does with a checkpoint it is given.
func sampleAndTrain(t *testing.T, name string, m *Model, ids []int) {
	t.Helper()
	g, err := NewSampler(m, BF16).Generate(context.Background(), ids[:8], SamplingParams{Temperature: 1, MaxNewTokens: 16, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	seq := append(slices.Clone(ids[:8]), g.OutputIDs...)
	if g.Routing.Tokens != len(seq)-1 || g.Routing.Validate(m.Cfg) != nil {
		t.Fatalf("%s: routing of %d tokens for %d", name, g.Routing.Tokens, len(seq))
	}
	nll := func() (*Pass, float64) {
		p, err := m.Forward(seq, ForwardOptions{Replay: &g.Routing})
		if err != nil {
			t.Fatal(err)
		}
		if mm, _ := CompareRouting(p.Routing, g.Routing); mm != 0 {
			t.Fatalf("%s: %d replayed sets differ", name, mm)
		}
		var s float64
		for _, v := range p.LogProbs[7:] {
			s -= float64(v)
		}
		return p, s
	}
	opt := NewAdam(m, AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	_, before := nll()
	for range 5 {
		p, _ := nll()
		d := make([]float32, len(seq)-1)
		for k := 7; k < len(d); k++ {
			d[k] = -1
		}
		if err := m.Backward(p, d, nil); err != nil {
			t.Fatal(err)
		}
		opt.Update(1)
	}
	if _, after := nll(); !(after < before) {
		t.Fatalf("%s: training on its own sample moved its NLL %.4f → %.4f", name, before, after)
	}
}

// refResult is one job's answer from the reference script.
type refResult struct {
	Error    string               `json:"error"`
	Files    []string             `json:"files"`
	LogProbs []float64            `json:"logprobs"`
	Values   []float64            `json:"values"`
	Experts  [][][]int            `json:"experts"`
	Margins  [][]float64          `json:"margins"`
	Grads    map[string][]float64 `json:"grads"`
}

// runReference runs jobs through transformers in one process.
func runReference(t *testing.T, py string, jobs []map[string]any) []refResult {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "jobs.json"), filepath.Join(dir, "out.json")
	b, err := json.Marshal(map[string]any{"jobs": jobs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join(testinfra.WorkDir(), "testdata", "qwen3_moe_reference.py"), in, out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(msg), "No module named") {
			t.Fatalf("the project's Python environment lacks a package (make setup installs requirements.txt): %s", msg)
		}
		t.Fatalf("reference script: %v\n%s", err, msg)
	}
	b, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []refResult `json:"results"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != len(jobs) {
		t.Fatalf("%d results for %d jobs", len(res.Results), len(jobs))
	}
	return res.Results
}
