package digest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// attempt stores one attempt's trajectory and reward rows and announces
// them the way the rollout and reward stages do, with event ids derived
// from key.
func attempt(t *testing.T, l *engine.Log, st store.ObjectStore, run, task, key string, turns int32, took time.Duration) {
	t.Helper()
	ctx := context.Background()
	traj, err := schemas.WriteTable(ctx, st, run, 0, []schemas.TrajectoryRow{{Run: run, TaskID: task, Purpose: "train",
		Turns: turns, Tokens: 40, Chunks: 1, Termination: "done", DurationMS: took.Milliseconds()}}, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rew, err := schemas.WriteTable(ctx, st, run, 0, []schemas.RewardRow{{Run: run, TaskID: task, Purpose: "train",
		Passed: 2, Total: 3, Scale: 1, Reward: 2, Source: "junit"}}, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []struct {
		typ     string
		payload any
	}{
		{schemas.RolloutCompleted, schemas.RolloutCompletedPayload{TaskID: task, Purpose: "train", Trajectory: traj}},
		{schemas.RewardScored, schemas.RewardScoredPayload{TaskID: task, Purpose: "train", Rewards: rew}},
	} {
		e, err := engine.NewRootEvent(run, ev.typ, key, ev.payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
}

func compute(t *testing.T, l *engine.Log, st store.ObjectStore, run string) *Digest {
	t.Helper()
	d, err := Compute(context.Background(), l, st, run)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Two runs whose rows differ only in wall-clock columns digest alike;
// objects no event names are not part of a run; an attempt stored twice
// is counted and changes the digest.
func TestDigest(t *testing.T) {
	st := testinfra.Store(t)
	// The second run has a store of its own, so its objects are its own
	// bytes rather than the first run's under the same key.
	cfg := testinfra.StoreConfig(t)
	cfg.Prefix += "-b"
	stb, err := s3.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	la, lb := testinfra.Log(t), testinfra.Log(t)
	attempt(t, la, st, "a", "t1", "t1", 3, 1200*time.Millisecond)
	attempt(t, lb, stb, "a", "t1", "t1", 3, 3400*time.Millisecond)
	da, db := compute(t, la, st, "a"), compute(t, lb, stb, "a")
	if diff := da.Diff(db); len(diff) != 0 || da.SHA256 != db.SHA256 {
		t.Fatalf("runs differing only in durations: %v", diff)
	}
	if da.Duplicates.Total() != 0 {
		t.Fatalf("duplicates %+v", da.Duplicates)
	}
	for _, tb := range da.Tables {
		want := int64(0)
		if tb.Name == "trajectories" || tb.Name == "rewards" {
			want = 1
		}
		if tb.Rows != want {
			t.Errorf("table %s: %d rows, want %d", tb.Name, tb.Rows, want)
		}
	}

	// An orphan left by a crash before its event: a table object and a
	// snapshot under the run's prefix that no event names.
	ctx := context.Background()
	if _, err := schemas.WriteTable(ctx, st, "a", 0, []schemas.TrajectoryRow{{Run: "a", TaskID: "t2", Purpose: "train"}}, schemas.WriterOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, keys.Snapshot("a", keys.Attempt{Purpose: "train", Task: "t2"}), strings.NewReader("x"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := compute(t, la, st, "a"); d.SHA256 != da.SHA256 {
		t.Fatalf("an orphan object changed the digest: %v", d.Diff(da))
	}

	// The same attempt played again, differently, and announced under
	// other ids. Its reward rows are byte-equal, so they share one
	// content-addressed object: the table holds them once.
	attempt(t, la, st, "a", "t1", "t1 again", 4, 5600*time.Millisecond)
	d := compute(t, la, st, "a")
	if d.Duplicates.Trajectories != 1 || d.Duplicates.Rewards != 0 {
		t.Fatalf("duplicates %+v, want one trajectory", d.Duplicates)
	}
	if d.SHA256 == da.SHA256 || len(d.Diff(da)) == 0 {
		t.Fatal("a duplicated attempt left the digest unchanged")
	}
}

// A claim check that does not match the stored bytes fails the digest
// with the key; a run without events is an error, not an empty digest.
func TestDigestRefusesBadClaims(t *testing.T) {
	st := testinfra.Store(t)
	l := testinfra.Log(t)
	ctx := context.Background()
	if _, err := Compute(ctx, l, st, "none"); err == nil {
		t.Fatal("a run without events digested")
	}
	ref, err := schemas.WriteTable(ctx, st, "b", 0, []schemas.RewardRow{{Run: "b", TaskID: "t", Reward: 1}}, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref.SHA256 = strings.Repeat("0", 64)
	ev, err := engine.NewRootEvent("b", schemas.RewardScored, "x", schemas.RewardScoredPayload{TaskID: "t", Rewards: ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := Compute(ctx, l, st, "b"); err == nil || !strings.Contains(err.Error(), ref.Key) {
		t.Fatalf("bad claim check: %v", err)
	}
}

// Git indexes of equal trees made at different times differ only in their
// stat cache, which gitIndex removes; a different tree still differs.
func TestGitIndex(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git unavailable")
	}
	index := func(content string, mtime time.Time) []byte {
		dir := t.TempDir()
		f := filepath.Join(dir, "a.txt")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "a.txt"}} {
			if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v: %s", args, err, out)
			}
		}
		data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	a := index("one\n", time.Unix(1e9, 0))
	b := index("one\n", time.Unix(2e9, 0))
	c := index("two\n", time.Unix(1e9, 0))
	if bytes.Equal(a, b) {
		t.Fatal("indexes of different mtimes are byte-equal; the test proves nothing")
	}
	if !bytes.Equal(gitIndex(a), gitIndex(b)) {
		t.Error("equal trees at different times differ after canonicalisation")
	}
	if bytes.Equal(gitIndex(a), gitIndex(c)) {
		t.Error("different trees are equal after canonicalisation")
	}
	if junk := []byte("DIRC not an index"); !bytes.Equal(gitIndex(junk), junk) {
		t.Error("an unparsable index was changed")
	}
}

// A checkpoint with sharded weights (an external model's, stored as its
// trainer wrote it): the digest covers every shard its index names, not
// the index alone, and a shard that is gone fails the digest by name.
func TestDigestShardedCheckpoint(t *testing.T) {
	st := testinfra.Store(t)
	l := testinfra.Log(t)
	ctx := context.Background()
	prefix := keys.Policy("s", 1)
	put := func(name, body string) {
		t.Helper()
		if _, err := st.Put(ctx, path.Join(prefix, name), strings.NewReader(body), int64(len(body)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("config.json", `{"model_type": "qwen3_moe"}`)
	put("model-00001-of-00002.safetensors", "first shard")
	put("model-00002-of-00002.safetensors", "second shard")
	put(moe.WeightsIndexFile, `{"metadata": {"total_size": 23}, "weight_map": {"embed": "model-00001-of-00002.safetensors", "lm_head": "model-00002-of-00002.safetensors", "norm": "model-00002-of-00002.safetensors"}}`)
	ref, err := checkpoint.Ref(ctx, st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := engine.NewRootEvent("s", schemas.PolicyUpdated, "u1", schemas.PolicyUpdatedPayload{PolicyVersion: 1, Checkpoint: ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	d := compute(t, l, st, "s")
	if len(d.Objects) != 1 || d.Objects[0].Kind != keys.KindPolicy || d.Objects[0].Count != 1 {
		t.Fatalf("objects %+v", d.Objects)
	}

	// Other bytes in a shard, the index unchanged: another digest.
	put("model-00002-of-00002.safetensors", "other shard!")
	if again := compute(t, l, st, "s"); again.SHA256 == d.SHA256 {
		t.Fatal("a changed shard left the digest unchanged: only the index was hashed")
	}
	if err := st.Delete(ctx, path.Join(prefix, "model-00001-of-00002.safetensors")); err != nil {
		t.Fatal(err)
	}
	if _, err := Compute(ctx, l, st, "s"); err == nil || !strings.Contains(err.Error(), "model-00001-of-00002.safetensors") {
		t.Fatalf("a missing shard: %v", err)
	}
}
