package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
	"github.com/t1pipe/t1/trainer"
)

// greetTask's solution is one command, so a tiny model can learn to call it.
const greetTask = "testdata/tasks/greet"

// Native tool calls end to end. An untrained model never samples
// <tool_call>, so a model with Qwen3's vocabulary is first fine-tuned on
// the harness's own demonstration (the task's solution played as bash tool
// calls through the template its checkpoint carries, in a real sandbox)
// until greedy decoding writes every demonstrated reply; then `t1
// serve-policy` serves it and `t1 rollout` with action_format tool-calls
// parses its call, runs it and the verifier passes, with every sampled id
// stored and no loss drift. The fine-tuning takes minutes on a CPU, so the
// test runs only when T1_TEST_TOOLCALL_SFT is set (BENCHMARKS.md, "Native
// tool calls").
func TestToolCallSFTEndToEnd(t *testing.T) {
	t.Parallel()
	if os.Getenv("T1_TEST_TOOLCALL_SFT") == "" {
		t.Skip("fine-tunes a Qwen3-vocabulary model for minutes: set T1_TEST_TOOLCALL_SFT=1")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	m, tok := qwen3Model(t, 32, 1024)
	ec := agent.Config{MaxNewTokens: 48, Context: 1024, MaxObservation: 1024, CommandTimeout: 30 * time.Second, MaxTurns: 4,
		SystemPrompt: agent.ToolCallsSystemPrompt, Model: agent.ModelSettings{ActionFormat: agent.FormatToolCalls}}
	ec.Sampling.Temperature, ec.Sampling.TopP = 0, 1
	chunks := demonstration(t, tok, ec)

	seqs := make([][]int, len(chunks))
	masks := make([][]float32, len(chunks))
	for i, c := range chunks {
		seqs[i] = c.IDs
		masks[i] = make([]float32, len(c.IDs)-1)
		for j := range masks[i] {
			if c.Loss[j+1] {
				masks[i][j] = 1
			}
		}
	}
	opt := moe.NewAdam(m, moe.AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	start, steps := time.Now(), 0
	var (
		loss float64
		err  error
	)
	for !greedyWrites(t, m, chunks, ec) {
		if steps == 600 {
			t.Fatalf("greedy decoding still misses a demonstrated reply after %d steps (loss %.4f)", steps, loss)
		}
		for range 10 {
			if loss, err = trainer.SFTStep(m, opt, seqs, masks, 1); err != nil {
				t.Fatal(err)
			}
			steps++
		}
	}
	took := time.Since(start)
	t.Logf("fine-tuned in %d steps, %s (%.2f s/step over %d sequences of %d tokens), loss %.4f",
		steps, took.Round(time.Second), took.Seconds()/float64(steps), len(seqs), len(seqs[0]), loss)

	dir := saveCheckpoint(t, m, tok)
	url := servePolicy(t, "--checkpoint", dir, "--precision", "f32", "--weight-version", "1")
	prompt, _ := json.Marshal(ec.SystemPrompt)
	cfg := writeConfig(t, fmt.Sprintf(`inference:
  backend: sglang
  url: %s
  checkpoint: %s
  weights_dir: `+t.TempDir()+`
stages:
  rollout:
    max_new_tokens: %d
    temperature: 0
    system_prompt: %s
    model:
      action_format: tool-calls
`, url, dir, ec.MaxNewTokens, prompt))
	rowsPath := filepath.Join(t.TempDir(), "rows.json")
	out, err := t1(t, "rollout", "--config", cfg, "--task", greetTask, "--max-turns", "4", "--context", "1024", "--rows", rowsPath, "--log-level", "warn")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(out)
	for _, want := range []string{"=== task_complete after 2 turns", "loss drift 0, malformed 0", "passed 2/2, solved true"} {
		if !strings.Contains(out, want) {
			t.Fatalf("transcript lacks %q", want)
		}
	}
	rows := readRows(t, rowsPath, m.Cfg)
	if len(rows.Turns) != 2 || !strings.Contains(rows.Turns[0].Action, `<tool_call>`) ||
		!strings.Contains(rows.Turns[0].Action, `"arguments": {"command": "echo hello > /app/out.txt"}`) {
		t.Fatalf("turns %+v", rows.Turns)
	}
}

// demonstration plays the task's solution through the harness as native
// tool calls, on the chat template the checkpoint's tokenizer carries, in
// a fresh sandbox: the chunks are what fine-tuning imitates.
func demonstration(t *testing.T, tok tokenizer.Tokenizer, ec agent.Config) []*agent.Chunk {
	t.Helper()
	dir, err := filepath.Abs(greetTask)
	if err != nil {
		t.Fatal(err)
	}
	task, err := harbor.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := ec.Chat(tok)
	if err != nil {
		t.Fatal(err)
	}
	format, err := ec.Format()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := agent.FromSolution(chat, format, string(task.Files[harbor.SolutionPath].Data))
	if err != nil {
		t.Fatal(err)
	}
	sc := config.Default().Sandbox
	be, err := sc.NewBackend("bwrap")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := be.Start(ctx, sandbox.Spec{TaskDir: dir, Limits: sc.SandboxLimits()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	res, err := agent.Run(ctx, pol, chat, sh, task.Instruction, ec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Termination != agent.EndComplete || res.Malformed != 0 || len(res.Turns) != 2 {
		t.Fatalf("the demonstration ended %s after %d turns, %d malformed", res.Termination, len(res.Turns), res.Malformed)
	}
	return res.Chunks
}

// greedyWrites reports whether greedy decoding from each demonstrated
// reply's prompt writes exactly that reply, at the f32 precision the
// policy is served with.
func greedyWrites(t *testing.T, m *moe.Model, chunks []*agent.Chunk, ec agent.Config) bool {
	t.Helper()
	s := moe.NewSampler(m, moe.F32)
	for _, c := range chunks {
		for j := 0; j < len(c.IDs); j++ {
			if !c.Loss[j] || (j > 0 && c.Loss[j-1]) {
				continue
			}
			end := j
			for end < len(c.IDs) && c.Loss[end] {
				end++
			}
			g, err := s.Generate(context.Background(), c.IDs[:j], moe.SamplingParams{MaxNewTokens: end - j})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(g.OutputIDs, c.IDs[j:end]) {
				return false
			}
		}
	}
	return true
}
