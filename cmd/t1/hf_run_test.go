package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

// `t1 run` end to end on a Hugging Face-tokenizer checkpoint served by a
// remote engine: `t1 serve-policy` serves a reference MoE with Qwen3's
// vocabulary in SGLang's wire format at f32, and the run renders with the
// Qwen3 chat template its checkpoint carries, replies as native tool
// calls, and has the engine load every policy version it samples from.
// The run completes; every attempt names the version it sampled from
// (the Synced engine refuses a reply of other weights, so that is the
// version that served it); the first iteration samples from the
// fine-tuned policy, loaded after the base policy served the first
// evaluation, and the trainer's f32 log-probs equal the served ones; every
// checkpoint the run stores or exports carries Qwen3's tokenizer files
// byte for byte.
func TestRunOnRemoteEngineWithHFCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole run with Qwen3's vocabulary over HTTP: a minute")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	m, tok := qwen3Model(t, 16, 512)
	files := tokenizerFiles(t)
	dir := saveCheckpoint(t, m, tok)
	url := servePolicy(t, "--checkpoint", dir, "--precision", "f32", "--weight-version", "0")
	weights, data := t.TempDir(), t.TempDir()
	prompt, _ := json.Marshal(agent.ToolCallsSystemPrompt)
	cfg := writeConfig(t, fmt.Sprintf(`run:
  id: hf
stages:
  control:
    pool_target: 2
    rounds: 1
    seeds: 2
    iterations: 2
    attempts: 1
    max_turns: 2
    sft_steps: 2
  eval:
    tasks: 1
    rounds: 0
    attempts: 1
  rollout:
    max_new_tokens: 24
    context: 512
    system_prompt: %s
    model:
      action_format: tool-calls
training:
  warmup:
    steps: 1
inference:
  backend: sglang
  url: %s
  checkpoint: %s
  weights_dir: %s
  precision: f32
`, prompt, url, dir, weights))
	start := time.Now()
	out, err := t1(t, "run", "--json", "--data", data, "--config", cfg, "--log-level", "warn")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("run took %s", time.Since(start).Round(time.Second))
	var sum execute.Summary
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "\n{")+1:]), &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if sum.Status != "completed" || sum.Events[schemas.PolicyUpdated] != 2 || sum.Events[schemas.SFTCompleted] != 1 || execute.FailedTotal(sum.Events) != 0 {
		t.Fatalf("run %s (%s): %+v", sum.Status, sum.Reason, sum.Events)
	}

	// Each attempt samples from the version its iteration trains: v1
	// (fine-tuned) in the first (iteration 0), v2 in the second;
	// demonstrations v0; evaluations v0, v1 and v3.
	out, err = t1(t, "events", "list", "--json", "--data", data, "--config", cfg, "--run", "hf", "--type", schemas.RolloutCompleted)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	versions := map[string]map[int64]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev struct {
			Payload schemas.RolloutCompletedPayload `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		p := ev.Payload
		key := fmt.Sprintf("%s %d", p.Purpose, p.Iteration)
		if p.Purpose == "train" && p.PolicyVersion != int64(p.Iteration)+1 {
			t.Errorf("training attempt of iteration %d sampled from v%d", p.Iteration, p.PolicyVersion)
		}
		if p.Tokens == 0 {
			t.Errorf("attempt %+v", p)
		}
		if versions[key] == nil {
			versions[key] = map[int64]int{}
		}
		versions[key][p.PolicyVersion]++
	}
	// Evaluations are stored under the iteration whose rollouts the policy
	// samples: the base and fine-tuned ones under 0, the last under 2.
	if len(versions["train 0"]) != 1 || len(versions["train 1"]) != 1 || len(versions["eval 0"]) != 2 || len(versions["eval 2"]) != 1 {
		t.Fatalf("attempts by purpose and iteration, per version: %v", versions)
	}

	// Fine-tuning changed the weights, so the served log-probs of the
	// first iteration are the fine-tuned policy's, not the base one's the
	// engine served before; the trainer reproduces them exactly.
	var tensors [][]byte
	for v := range 4 {
		vdir := filepath.Join(weights, "hf", fmt.Sprintf("v%06d", v))
		st, err := os.ReadFile(filepath.Join(vdir, "model.safetensors"))
		if err != nil || len(st) < 8 {
			t.Fatalf("version %d was never exported for the engine: %v", v, err)
		}
		tensors = append(tensors, st[8+binary.LittleEndian.Uint64(st):])
		sameTokenizer(t, files, vdir)
	}
	if bytes.Equal(tensors[0], tensors[1]) {
		t.Fatal("fine-tuning left the weights as they were: nothing shows which version served")
	}
	stored, _ := filepath.Glob(filepath.Join(data, "s3", "*", "runs", "hf", "policy", "v*"))
	if len(stored) != 4 {
		t.Fatalf("stored policies %v", stored)
	}
	for _, d := range stored {
		sameTokenizer(t, files, d)
	}
	for name, r := range testinfra.ActorReports(t, data, "hf", 2) {
		if r.Actions == 0 || r.LogProbGapMax != 0 || r.LossDrift != 0 {
			t.Errorf("%s: %+v: the served log-probs are not the trained policy's", name, r)
		}
	}
}

// tokenizerFiles reads Qwen3's tokenizer files as the model ships them
// (before a run in process moves the working directory).
func tokenizerFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(qwen3Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	return files
}

// sameTokenizer fails unless dir holds files byte for byte.
func sameTokenizer(t *testing.T, files map[string][]byte, dir string) {
	t.Helper()
	for f, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s/%s is not the model's (%d bytes, want %d): %v", dir, f, len(got), len(want), err)
		}
	}
}
