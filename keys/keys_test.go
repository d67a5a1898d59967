package keys

import (
	"strings"
	"testing"
)

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Every key function's output, byte for byte: run digests, event
// payloads and stored objects name these keys, so none may change.
func TestKeys(t *testing.T) {
	train := Attempt{Iteration: 3, Purpose: "train", PolicyVersion: 2, Task: "t1-log-rotate", Attempt: 1}
	eval := Attempt{Iteration: 0, Purpose: "eval", Suite: "builtin", PolicyVersion: 12, Task: "e7", Attempt: 0}
	part := func(run, table, column string, partition int, sha string) string {
		k, err := TableObject(run, table, column, partition, sha)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, c := range []struct{ got, want string }{
		{Run("r1"), "runs/r1/"},
		{TablePrefix("r1", "tokens"), "runs/r1/tokens/"},
		{part("r1", "tokens", "iter", 3, sha), "runs/r1/tokens/iter-0003/part-0123456789abcdef0123456789abcdef.parquet"},
		{part("r1", "tasks", "round", 0, sha[:32]), "runs/r1/tasks/round-0000/part-0123456789abcdef0123456789abcdef.parquet"},
		{part("r1", "eval_results", "iter", 12345, sha), "runs/r1/eval_results/iter-12345/part-0123456789abcdef0123456789abcdef.parquet"},
		{Manifest("r1", 7, sha), "runs/r1/batches/iter=0007/manifest-0123456789abcdef0123456789abcdef.json"},
		{train.Name(), "iter=0003/train/v2/t1-log-rotate/a1"},
		{eval.Name(), "iter=0000/eval-builtin/v12/e7/a0"},
		{AttemptMarker("r1", train), "runs/r1/attempts/iter=0003/train/v2/t1-log-rotate/a1.json"},
		{AttemptMarker("r1", eval), "runs/r1/attempts/iter=0000/eval-builtin/v12/e7/a0.json"},
		{Snapshot("r1", train), "runs/r1/snapshots/iter=0003/train/v2/t1-log-rotate/a1.tar"},
		{Snapshot("r1", eval), "runs/r1/snapshots/iter=0000/eval-builtin/v12/e7/a0.tar"},
		{Bundles("r1"), "runs/r1/bundles/"},
		{Bundle("r1", "t1--log-rotate"), "runs/r1/bundles/t1--log-rotate.tar.gz"},
		{Lineage("r1", "s0-3"), "runs/r1/lineage/s0-3.json"},
		{SynthReply("r1", "s0-3"), "runs/r1/synth/llm/s0-3.json"},
		{Policy("r1", 0), "runs/r1/policy/v000000"},
		{Policy("r1", 1234567), "runs/r1/policy/v1234567"},
		{Critics("r1"), "runs/r1/critic/"},
		{Critic("r1", 3), "runs/r1/critic/v000003"},
		{FreshCritic("r1", 1), "runs/r1/critic/fresh-v000001"},
		{TrainingReport("r1", 2, 3), "runs/r1/training/iter=0002/policy-v000003.json"},
		{Blob("r1", 42), "runs/r1/blobs/item-00042.bin"},
		{Report("r1"), "runs/r1/report.md"},
		{ReportHTML("r1"), "runs/r1/report.html"},
		{Ablation("r1"), "runs/r1/ablation.md"},
		{AblationHTML("r1"), "runs/r1/ablation.html"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

func TestTableObjectErrors(t *testing.T) {
	for _, c := range []struct {
		run       string
		partition int
		sha, want string
	}{
		{"Bad_Run", 0, sha, `run id "Bad_Run"`},
		{"r1", -1, sha, "tokens: negative iter partition -1"},
		{"r1", 0, sha[:31], "tokens: content hash"},
	} {
		if _, err := TableObject(c.run, "tokens", "iter", c.partition, c.sha); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TableObject(%q, %d, %q) = %v, want %q", c.run, c.partition, c.sha, err, c.want)
		}
	}
}

func TestValidRun(t *testing.T) {
	for _, run := range []string{"r", "tiny", "0a", "a-b-c", strings.Repeat("a", 64)} {
		if err := ValidRun(run); err != nil {
			t.Errorf("ValidRun(%q) = %v", run, err)
		}
	}
	for _, run := range []string{"", "-a", "A", "a.b", "a/b", "a b", "a*", "a>", strings.Repeat("a", 65)} {
		if err := ValidRun(run); err == nil {
			t.Errorf("ValidRun(%q) accepted", run)
		}
	}
}

func TestKind(t *testing.T) {
	for key, want := range map[string]string{
		Snapshot("r1", Attempt{Purpose: "train", Task: "t"}): KindSnapshots,
		Policy("r1", 2):                   KindPolicy,
		Critic("r1", 2):                   KindCritic,
		Manifest("r1", 1, sha):            KindBatches,
		TablePrefix("r1", "tokens") + "x": "tokens",
		Report("r1"):                      "",
		"other/r1/policy/x":               "",
	} {
		if got := Kind(key); got != want {
			t.Errorf("Kind(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestBundleTask(t *testing.T) {
	if task, ok := BundleTask("r1", Bundle("r1", "t1--log-rotate")); !ok || task != "t1--log-rotate" {
		t.Errorf("BundleTask of Bundle = %q, %v", task, ok)
	}
	for _, key := range []string{Bundle("r2", "t"), Bundles("r1") + "t.tar", Bundles("r1") + ".tar.gz", Lineage("r1", "t")} {
		if task, ok := BundleTask("r1", key); ok {
			t.Errorf("BundleTask(%q) = %q", key, task)
		}
	}
}
