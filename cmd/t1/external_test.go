package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/t1pipe/t1/moe"
)

// externalDir writes the checkpoint directory of an external
// architecture as a model hub holds it for a model an engine serves:
// config.json of Qwen3-30B-A3B (moe/testdata) with its dimensions set to
// the served model's, Qwen3's tokenizer files, and no weights, which the
// engine holds.
func externalDir(t *testing.T, layers, experts, topK, context int) string {
	t.Helper()
	b, err := os.ReadFile("../../moe/testdata/qwen3-30b-a3b/config.json")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for from, to := range map[string]string{
		`"num_hidden_layers": 48`:          fmt.Sprintf(`"num_hidden_layers": %d`, layers),
		`"num_experts": 128`:               fmt.Sprintf(`"num_experts": %d`, experts),
		`"num_experts_per_tok": 8`:         fmt.Sprintf(`"num_experts_per_tok": %d`, topK),
		`"max_position_embeddings": 40960`: fmt.Sprintf(`"max_position_embeddings": %d`, context),
	} {
		if !strings.Contains(s, from) {
			t.Fatalf("%q not in the fixture", from)
		}
		s = strings.Replace(s, from, to, 1)
	}
	dir := t.TempDir()
	files := tokenizerFiles(t)
	files[moe.ConfigFile] = []byte(s)
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// `t1 rollout` against a remote engine that holds the weights: the
// configuration names a Qwen3-MoE checkpoint directory (model_type
// qwen3_moe, Qwen3's tokenizer and chat template, no weights), and `t1
// serve-policy` serves a Qwen3-MoE of those dimensions with Qwen3's
// vocabulary in SGLang's wire format. The
// episode runs with the checkpoint's template and tokenizer, and its
// routing has the checkpoint's shape — 3 layers, top-1 of 4 experts,
// none of them the configuration's defaults. The in-process engine, which
// runs the model itself, refuses the same directory in one line: it has
// no weights.
func TestRolloutExternalCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("a model with Qwen3's vocabulary over HTTP: seconds per turn")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	tok, err := moe.LoadTokenizer(qwen3Dir)
	if err != nil {
		t.Fatalf("%v (run make setup)", err)
	}
	mc := moe.Config{Vocab: tok.VocabSize(), Layers: 3, DModel: 16, Heads: 2, KVHeads: 1, HeadDim: 8, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 4, TopK: 1, DFF: 16, Context: 2048, Seed: 5}
	m, err := moe.NewModel(mc)
	if err != nil {
		t.Fatal(err)
	}
	url := servePolicy(t, "--checkpoint", saveCheckpoint(t, m, tok), "--precision", "f32", "--weight-version", "0")
	ext := externalDir(t, mc.Layers, mc.Experts, mc.TopK, mc.Context)
	rollout := func(backend string) (string, string, error) {
		weights := ""
		if backend != "reference" {
			weights = "  weights_dir: " + t.TempDir() + "\n"
		}
		cfg := writeConfig(t, fmt.Sprintf(`inference:
  backend: %s
  url: %s
  checkpoint: %s
`+weights+`stages:
  rollout:
    max_new_tokens: 16
    model:
      action_format: tool-calls
`, backend, url, ext))
		rows := filepath.Join(t.TempDir(), "rows.json")
		out, err := t1(t, "rollout", "--config", cfg, "--task", "../../harbor/testdata/tasks/log-rotate", "--max-turns", "2",
			"--seed", "3", "--verify=false", "--rows", rows, "--log-level", "warn")
		return out, rows, err
	}
	out, rowsPath, err := rollout("sglang")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	mm := regexp.MustCompile(`after (\d+) turns, (\d+) sampled tokens, .* loss drift (\d+)`).FindStringSubmatch(out)
	if mm == nil || mm[1] == "0" || mm[3] != "0" {
		t.Fatalf("want an episode of turns with loss drift 0:\n%s", out)
	}
	if !strings.Contains(out, "(context 2048 tokens)") {
		t.Fatalf("the episode's context is not the checkpoint's max_position_embeddings:\n%s", out)
	}
	// readRows checks every chunk's routing against the checkpoint's shape.
	rows := readRows(t, rowsPath, mc)
	imStart, _ := tok.SpecialID("<|im_start|>")
	for i, row := range rows.Tokens {
		if int(row.TokenIDs[0]) != imStart {
			t.Fatalf("chunk %d opens with id %d, not Qwen3's <|im_start|>: not the checkpoint's template", i, row.TokenIDs[0])
		}
	}

	// The in-process engine runs a Qwen3-MoE, so it needs the weights.
	_, _, err = rollout("reference")
	if err == nil {
		t.Fatal("the reference engine ran a checkpoint without weights")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "no weights") || !strings.Contains(msg, ext) {
		t.Fatalf("want one line naming the checkpoint and its missing weights: %q", msg)
	}
}

// `t1 run` from an external architecture's checkpoint stores it as
// policy version 0 for the exec trainer to start from, so a directory
// without weights, or whose shard index names a shard that is not there,
// is refused before anything starts, in one line saying what is missing;
// a complete sharded one passes on to the engine check (here a closed
// port, named).
func TestRunChecksAnExternalCheckpointsWeights(t *testing.T) {
	if testing.Short() {
		t.Skip("reads Qwen3's tokenizer three times: seconds")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	run := func(ck string) error {
		cfg := writeConfig(t, fmt.Sprintf(`run:
  id: ext
inference:
  backend: sglang
  url: %s
  checkpoint: %s
  weights_dir: `+t.TempDir()+`
training:
  trainer:
    backend: exec
    command: [train, --job, "{job}", --out, "{out}"]
`, url, ck))
		_, err := t1(t, "run", "--data", t.TempDir(), "--config", cfg, "--log-level", "warn")
		return err
	}
	bare := externalDir(t, 48, 128, 8, 40960)
	sharded := externalDir(t, 48, 128, 8, 40960)
	files := map[string]string{moe.WeightsIndexFile: `{"weight_map": {"embed": "model-00001-of-00002.safetensors", "lm_head": "model-00002-of-00002.safetensors"}}`,
		"model-00001-of-00002.safetensors": "first shard", "model-00002-of-00002.safetensors": "second shard"}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(sharded, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(sharded); err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("a complete sharded checkpoint: %v, want the engine check naming %s", err, url)
	}
	if err := os.Remove(filepath.Join(sharded, "model-00002-of-00002.safetensors")); err != nil {
		t.Fatal(err)
	}
	for ck, want := range map[string]string{bare: "has no weights", sharded: "names the shard model-00002-of-00002.safetensors, which is not there"} {
		err := run(ck)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ck) {
			t.Errorf("%s: %v, want one line naming it and %q", ck, err, want)
		}
	}
}
