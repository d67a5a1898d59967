package moe

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/keys"
)

// trainedCheckpoint is a default-tokenizer model after two SFT steps.
func trainedCheckpoint(t *testing.T) *Checkpoint {
	t.Helper()
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	m, opt := trainable(t)
	for i := 0; i < 2; i++ {
		nllStep(t, m, opt, chatSeqs(t, 32, 2))
	}
	return &Checkpoint{Model: m, Tokenizer: tok, Meta: map[string]string{"policy_version": "2"}}
}

func sameCheckpoint(t *testing.T, a, b *Checkpoint) {
	t.Helper()
	if a.Model.Cfg != b.Model.Cfg {
		t.Fatalf("config %+v vs %+v", a.Model.Cfg, b.Model.Cfg)
	}
	for i, ta := range a.Model.W.Tensors {
		tb := b.Model.W.Tensors[i]
		if ta.Name != tb.Name || !slices.Equal(ta.Shape, tb.Shape) || !slices.Equal(ta.Data, tb.Data) {
			t.Fatalf("tensor %s differs after reload", ta.Name)
		}
	}
	s := "<|user|>ls -la /tmp<|end|>"
	if !slices.Equal(a.Tokenizer.Encode(s), b.Tokenizer.Encode(s)) {
		t.Fatal("tokenizer differs after reload")
	}
	if b.Meta["policy_version"] != a.Meta["policy_version"] {
		t.Fatalf("meta %v", b.Meta)
	}
	// Bit-identical weights give bit-identical generations.
	prompt := a.Tokenizer.Encode("<|user|>list files<|end|><|assistant|>")
	sp := SamplingParams{Temperature: 1, MaxNewTokens: 16, Seed: 9}
	ga, err := NewSampler(a.Model, BF16).Generate(context.Background(), prompt, sp)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := NewSampler(b.Model, BF16).Generate(context.Background(), prompt, sp)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ga.OutputIDs, gb.OutputIDs) || !slices.Equal(ga.LogProbs, gb.LogProbs) {
		t.Fatal("reloaded model samples differently")
	}
}

func TestCheckpointDir(t *testing.T) {
	c := trainedCheckpoint(t)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := c.SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	back, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, c, back)
	// A config that does not match the weights is named in the error.
	cfg := c.Model.Cfg
	cfg.Layers = 3
	three, err := MarshalConfig(cfg, LMHead)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), three, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "model.layers.2.") {
		t.Fatalf("mismatched config: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"model_type":"qwen3_moe","vocab_size":512}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("bad config: %v", err)
	}
}

func TestCheckpointStore(t *testing.T) {
	st := openStore(t)
	c := trainedCheckpoint(t)
	if err := c.Save(context.Background(), st, keys.Policy("test", 2)); err != nil {
		t.Fatal(err)
	}
	back, err := Load(context.Background(), st, keys.Policy("test", 2))
	if err != nil {
		t.Fatal(err)
	}
	sameCheckpoint(t, c, back)
	if _, err := Load(context.Background(), st, keys.Policy("test", 3)); err == nil || !strings.Contains(err.Error(), keys.Policy("test", 3)+"/config.json") {
		t.Fatalf("missing checkpoint: %v", err)
	}
}

func TestSafetensorsRejects(t *testing.T) {
	var buf bytes.Buffer
	ts := []*Tensor{{Name: "a", Shape: []int{2}, Data: []float32{1, 2}}, {Name: "b", Shape: []int{1, 1}, Data: []float32{3}}}
	if err := WriteSafetensors(&buf, ts, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	got, meta, err := ReadSafetensors(good)
	if err != nil || meta["k"] != "v" || !slices.Equal(got["a"].Data, []float32{1, 2}) || !slices.Equal(got["b"].Shape, []int{1, 1}) {
		t.Fatalf("round trip: %v %v %v", got, meta, err)
	}
	if (len(good)-8-12)%8 != 0 {
		// header is padded to 8 bytes
		t.Fatalf("header not 8-byte aligned")
	}
	cases := map[string][]byte{
		"short":     good[:4],
		"trailing":  append(slices.Clone(good), 0, 0, 0, 0),
		"truncated": good[:len(good)-4],
		"dtype":     bytes.Replace(slices.Clone(good), []byte(`"F32"`), []byte(`"F16"`), 1),
	}
	for name, b := range cases {
		if _, _, err := ReadSafetensors(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzReadSafetensors(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteSafetensors(&buf, []*Tensor{{Name: "x", Shape: []int{3}, Data: []float32{1, 2, 3}}}, nil)
	f.Add(buf.Bytes())
	f.Add([]byte("\x10\x00\x00\x00\x00\x00\x00\x00{}              "))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, meta, err := ReadSafetensors(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes and parses to the same tensors.
		var list []*Tensor
		for _, v := range ts {
			list = append(list, v)
		}
		slices.SortFunc(list, func(a, b *Tensor) int { return strings.Compare(a.Name, b.Name) })
		var out bytes.Buffer
		if err := WriteSafetensors(&out, list, meta); err != nil {
			t.Fatal(err)
		}
		again, _, err := ReadSafetensors(out.Bytes())
		if err != nil || len(again) != len(ts) {
			t.Fatalf("re-read: %v", err)
		}
	})
}

// TestCheckpointResumesTraining: with the optimizer saved, training
// continued from a reload matches uninterrupted training bit for bit.
func TestCheckpointResumesTraining(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	m, opt := trainable(t)
	seqs := chatSeqs(t, 32, 2)
	step := func(m *Model, opt *Adam) {
		nllStep(t, m, opt, seqs)
	}
	step(m, opt)
	st := openStore(t)
	dir := t.TempDir()
	ck := &Checkpoint{Model: m, Tokenizer: tok, Optimizer: opt}
	if err := ck.Save(context.Background(), st, "resume/ck"); err != nil {
		t.Fatal(err)
	}
	if err := ck.SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	fromStore, err := Load(context.Background(), st, "resume/ck")
	if err != nil {
		t.Fatal(err)
	}
	fromDir, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	step(m, opt)
	step(m, opt)
	for _, back := range []*Checkpoint{fromStore, fromDir} {
		if back.Optimizer == nil || back.Optimizer.Steps() != 1 || back.Optimizer.Cfg != DefaultAdam() {
			t.Fatalf("optimizer not restored: %+v", back.Optimizer)
		}
		step(back.Model, back.Optimizer)
		step(back.Model, back.Optimizer)
		for i, ta := range m.W.Tensors {
			if !slices.Equal(ta.Data, back.Model.W.Tensors[i].Data) {
				t.Fatalf("%s differs after resuming", ta.Name)
			}
		}
	}
	// Saving again without the optimizer removes the stale one.
	if err := (&Checkpoint{Model: m, Tokenizer: tok}).Save(context.Background(), st, "resume/ck"); err != nil {
		t.Fatal(err)
	}
	if err := (&Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, load := range []func() (*Checkpoint, error){
		func() (*Checkpoint, error) { return Load(context.Background(), st, "resume/ck") },
		func() (*Checkpoint, error) { return LoadDir(dir) },
	} {
		back, err := load()
		if err != nil || back.Optimizer != nil {
			t.Fatalf("stale optimizer: %v %v", back, err)
		}
	}
}

// config.json carries Qwen3-MoE's field names and values; a checkpoint
// of the earlier t1_moe architecture is refused on load with the way
// forward, whatever its weights.
func TestCheckpointConfigLayouts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Context, cfg.Seed, cfg.RopeTheta = 96, 9, 5e5
	b, err := MarshalConfig(cfg, LMHead)
	if err != nil {
		t.Fatal(err)
	}
	var hf map[string]any
	if err := json.Unmarshal(b, &hf); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"model_type": ModelType, "vocab_size": 512.0, "num_hidden_layers": 2.0, "hidden_size": 64.0,
		"num_attention_heads": 4.0, "num_key_value_heads": 2.0, "head_dim": 16.0, "num_experts": 8.0, "num_experts_per_tok": 2.0,
		"moe_intermediate_size": 128.0, "max_position_embeddings": 96.0, "rope_theta": 5e5, "rms_norm_eps": 1e-6, "norm_topk_prob": true,
		"tie_word_embeddings": false, "hidden_act": "silu", "decoder_sparse_step": 1.0} {
		if hf[k] != want {
			t.Errorf("config.json %s = %v, want %v", k, hf[k], want)
		}
	}
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := (&Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	legacy, err := json.Marshal(map[string]any{"architectures": []string{"T1MoeForCausalLM"}, "model_type": LegacyModelType, "vocab_size": 512})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), "earlier reference MoE") {
		t.Fatalf("a t1_moe checkpoint: %v", err)
	}
}

// Mark's restore puts the moments and step count back as they were, so
// that an update the trainer does not take leaves no trace in the optimiser
// it saves.
func TestAdamMarkRestores(t *testing.T) {
	m, opt := trainable(t)
	seqs := chatSeqs(t, 32, 2)
	nllStep(t, m, opt, seqs)
	want := CloneData(opt.stateTensors())
	restore := opt.Mark()
	nllStep(t, m, opt, seqs)
	nllStep(t, m, opt, seqs)
	restore()
	if opt.Steps() != 1 {
		t.Fatalf("%d steps after restoring, want 1", opt.Steps())
	}
	for i, tn := range opt.stateTensors() {
		if !slices.Equal(tn.Data, want[i]) {
			t.Fatalf("%s differs after restoring", tn.Name)
		}
	}
}

// trainable is a default model of a 64-token context and a fresh Adam for it.
func trainable(t *testing.T) (*Model, *Adam) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Context = 64
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, NewAdam(m, DefaultAdam())
}
