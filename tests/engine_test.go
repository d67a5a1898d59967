package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// `t1 run` on a remote engine (`t1 serve-policy` in SGLang's wire format,
// serving at f32 as training computes): the engine is made to load every
// policy version before it samples for it, so each actor update sees
// log-probs its own f32 forward reproduces bit for bit. The first
// iteration samples from the fine-tuned policy (version 1), which the
// engine loaded after serving the base policy (version 0) to the first
// evaluation: a stale engine would have served version 0's log-probs.
func TestRunOnRemoteEngineSyncsWeights(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	serveCfg := writeConfig(t, "run:\n  id: server\n")
	server := command(t, t.TempDir(), serveCfg, "serve-policy", "--addr", "127.0.0.1:0", "--precision", "f32", "--log-level", "info")
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var serverLog lockedBuffer
	server.Stderr = &serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { server.Process.Kill(); server.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("serve-policy: %v\n%s", err, serverLog.String())
	}
	url := regexp.MustCompile(`http://\S+`).FindString(line)
	if url == "" {
		t.Fatalf("serve-policy printed %q", line)
	}
	weights := t.TempDir()
	remote := strings.Replace(tinyPipeline, "    iterations: 1\n", "    iterations: 2\n", 1) +
		fmt.Sprintf("inference:\n  backend: sglang\n  url: %s\n  weights_dir: %s\n", url, weights)
	data := t.TempDir()
	completeRun(t, data, writeConfig(t, remote))

	// Versions 0 (base), 1 (fine-tuned), 2 and 3 (PPO) were each exported
	// in the Hugging Face layout and loaded. The tiny run's rewards are
	// all equal, so PPO has no signal and keeps the tensors; fine-tuning
	// changes them.
	var tensors [][]byte
	for v := range 4 {
		dir := filepath.Join(weights, "tiny", fmt.Sprintf("v%06d", v))
		st, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		if err != nil || len(st) < 8 {
			t.Fatal(err)
		}
		tensors = append(tensors, st[8+binary.LittleEndian.Uint64(st):]) // without the header's metadata
		var hf struct {
			ModelType string `json:"model_type"`
			Layers    int    `json:"num_hidden_layers"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err != nil || json.Unmarshal(b, &hf) != nil || hf.ModelType != "qwen3_moe" || hf.Layers != 2 {
			t.Errorf("%s/config.json: %+v %v", dir, hf, err)
		}
		if !strings.Contains(serverLog.String(), fmt.Sprintf("weight_version=%d", v)) {
			t.Errorf("the engine never loaded version %d:\n%s", v, serverLog.String())
		}
	}
	if bytes.Equal(tensors[0], tensors[1]) {
		t.Fatal("fine-tuning left the weights as they were: nothing shows which version served")
	}
	reports, _ := filepath.Glob(filepath.Join(data, "s3", "*", "runs", "tiny", "training", "iter=*", "policy-v*.json"))
	if len(reports) != 2 {
		t.Fatalf("training reports %v", reports)
	}
	for _, p := range reports {
		var rep struct {
			Metrics struct {
				Actions       int64   `json:"actions"`
				LogProbGapMax float64 `json:"logprob_gap_max"`
			} `json:"metrics"`
		}
		b, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(b, &rep) != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if rep.Metrics.Actions == 0 || rep.Metrics.LogProbGapMax != 0 {
			t.Errorf("%s: %+v: the served log-probs are not the trained policy's", filepath.Base(p), rep.Metrics)
		}
	}
}

// lockedBuffer is written by a child's output copier while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
