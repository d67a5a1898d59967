package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/tokenizer"
)

// qwen3Model is an untrained reference MoE of width d with Qwen3's
// vocabulary (151,669 ids) and the Qwen3 tokenizer, as a checkpoint holds
// it (tokenizer.json with tokenizer_config.json).
func qwen3Model(t *testing.T, d, context int) (*moe.Model, tokenizer.Tokenizer) {
	t.Helper()
	tok, err := moe.LoadTokenizer(qwen3Dir)
	if err != nil {
		t.Fatalf("%v (run make setup)", err)
	}
	m, err := moe.NewModel(moe.Config{Vocab: tok.VocabSize(), Layers: 2, DModel: d, Heads: 2, KVHeads: 1, HeadDim: d / 2, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 4, TopK: 2, DFF: d, Context: context, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

// saveCheckpoint writes m with tok in the Hugging Face layout.
func saveCheckpoint(t *testing.T, m *moe.Model, tok tokenizer.Tokenizer) string {
	t.Helper()
	dir := t.TempDir()
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// readRows reads what `t1 rollout --rows` wrote and checks what every
// stored attempt holds: a log-prob for every sampled id, finite and at
// most 0, and routing for every id of every chunk, of the model's shape.
func readRows(t *testing.T, path string, mc moe.Config) agent.Rows {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows agent.Rows
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows.Tokens) == 0 || len(rows.Routing) != len(rows.Tokens) {
		t.Fatalf("%d token rows, %d routing rows", len(rows.Tokens), len(rows.Routing))
	}
	for i, row := range rows.Tokens {
		if len(row.LogProbs) != len(row.TokenIDs) || len(row.LossMask) != len(row.TokenIDs) {
			t.Fatalf("chunk %d: %d ids, %d log-probs, %d mask", i, len(row.TokenIDs), len(row.LogProbs), len(row.LossMask))
		}
		for j, id := range row.TokenIDs {
			if id < 0 || int(id) >= mc.Vocab {
				t.Fatalf("chunk %d: id %d outside the vocabulary", i, id)
			}
			if lp := float64(row.LogProbs[j]); row.LossMask[j] && (lp > 0 || math.IsInf(lp, 0) || math.IsNaN(lp)) {
				t.Fatalf("chunk %d id %d: sampled log-prob %v", i, j, lp)
			}
		}
		r := rows.Routing[i]
		if int(r.Tokens) != len(row.TokenIDs) || int(r.Layers) != mc.Layers || int(r.TopK) != mc.TopK || int(r.Experts) != mc.Experts {
			t.Fatalf("chunk %d: %d ids, routing %d×%d×%d of %d experts", i, len(row.TokenIDs), r.Tokens, r.Layers, r.TopK, r.Experts)
		}
	}
	return rows
}

// An episode end to end through the commands: `t1 serve-policy` serves a
// Hugging Face-layout checkpoint with Qwen3's tokenizer in SGLang's wire
// format over HTTP, and `t1 rollout` against it renders with the chat
// template that checkpoint carries, in a real sandbox. Replies are read
// as Terminus-2's JSON, which an untrained model never writes: every turn
// earns a corrective observation, so the episode runs all its turns. The rows it writes are those a rollout stores: every sampled
// id with its log-prob, routing for every chunk, each boundary's repair
// counted, and no loss-region drift.
func TestServeAndRolloutHFCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("a model with Qwen3's vocabulary over HTTP: seconds per turn")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	m, tok := qwen3Model(t, 16, 2048)
	mc, dir := m.Cfg, saveCheckpoint(t, m, tok)
	url := servePolicy(t, "--checkpoint", dir, "--precision", "f32", "--weight-version", "0")
	cfg := writeConfig(t, fmt.Sprintf(`inference:
  backend: sglang
  url: %s
  checkpoint: %s
  weights_dir: `+t.TempDir()+`
stages:
  rollout:
    max_new_tokens: 24
    model:
      action_format: terminus-json
`, url, dir))
	rowsPath := filepath.Join(t.TempDir(), "rows.json")
	const turns = 3
	out, err := t1(t, "rollout", "--config", cfg, "--task", "../../harbor/testdata/tasks/log-rotate", "--max-turns", strconv.Itoa(turns),
		"--context", "2048", "--seed", "5", "--verify=false", "--rows", rowsPath, "--log-level", "warn")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(out)
	mm := regexp.MustCompile(`after (\d+) turns, (\d+) sampled tokens, (\d+) chunks, repairs map\[(.*)\], loss drift (\d+), malformed (\d+)`).FindStringSubmatch(out)
	if mm == nil {
		t.Fatalf("no summary line:\n%s", out)
	}
	if mm[1] != strconv.Itoa(turns) || mm[5] != "0" || mm[6] != mm[1] {
		t.Fatalf("want %d turns, loss drift 0 and every reply malformed: %s", turns, mm[0])
	}
	rows := readRows(t, rowsPath, mc)
	if len(rows.Turns) != turns {
		t.Fatalf("%d turns stored", len(rows.Turns))
	}
	imStart, _ := tok.SpecialID("<|im_start|>")
	boundaries, sampled := 0, 0
	for i, row := range rows.Tokens {
		if int(row.TokenIDs[0]) != imStart {
			t.Fatalf("chunk %d opens with id %d, not Qwen3's <|im_start|>: not the model's template", i, row.TokenIDs[0])
		}
		for j := range row.TokenIDs {
			if row.LossMask[j] {
				sampled++
				if row.LogProbs[j] == 0 {
					t.Fatalf("chunk %d id %d: an untrained model sampled with certainty", i, j)
				}
			}
		}
		boundaries += int(row.StrictPrefix + row.ClippedNorm + row.TextRetokened)
		if i > 0 && row.DriftRepair == schemas.RepairNewChunk {
			boundaries++
		}
	}
	if strconv.Itoa(sampled) != mm[2] || boundaries != turns-1 {
		t.Fatalf("%d loss ids for %s sampled, %d repairs counted for %d boundaries", sampled, mm[2], boundaries, turns-1)
	}
}
