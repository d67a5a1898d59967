package keys

import (
	"fmt"
	"regexp"
	"strings"
)

// Root is the first component of every key of a run.
const Root = "runs"

// The kinds of object: the key component after runs/<run>/ (Kind). A
// table object's kind is its table's name.
const (
	KindAttempts  = "attempts"
	KindSnapshots = "snapshots"
	KindBatches   = "batches"
	KindPolicy    = "policy"
	KindCritic    = "critic"
	KindTraining  = "training"
	KindBundles   = "bundles"
	KindLineage   = "lineage"
	KindSynth     = "synth"
	KindBlobs     = "blobs"
	// KindCompactions holds the records of compacted table partitions.
	KindCompactions = "compactions"
)

var runRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// ValidRun reports whether run can name a run: 1 to 64 of [a-z0-9-],
// starting with a letter or digit, so that it is one component of every
// key of the run and one token of its event subjects (t1.<run>.<type>).
func ValidRun(run string) error {
	if !runRe.MatchString(run) {
		return fmt.Errorf("run id %q: want 1-64 of [a-z0-9-], starting with a letter or digit", run)
	}
	return nil
}

// ImageLayers is the prefix of the image layers (package image): they
// belong to no run, and runs share them.
const ImageLayers = "images/layers/"

// ImageLayer is the tar of the image layer with the content address
// layer: images/layers/<layer>.tar.
func ImageLayer(layer string) string { return ImageLayers + layer + ".tar" }

// Run is the prefix of every key of run: runs/<run>/.
func Run(run string) string { return Root + "/" + run + "/" }

// Kind is the kind of the object at key: its component after runs/<run>/,
// or "" for a key that is not below a kind of a run.
func Kind(key string) string {
	parts := strings.SplitN(key, "/", 4)
	if len(parts) < 4 || parts[0] != Root {
		return ""
	}
	return parts[2]
}

// TablePrefix is the prefix of every object of run's table:
// runs/<run>/<table>/.
func TablePrefix(run, table string) string { return Run(run) + table + "/" }

// TableObject is the key of an object of run's table whose partition
// directory dir has the value partition, with content hash sha (hex, at
// least 32 digits):
// runs/<run>/<table>/<dir>-NNNN/part-<sha[:32]>.parquet. The directory is
// <dir>-NNNN, not <dir>=NNNN, so that no hive-partitioned reader takes a
// column from the path: the partition value is a data column of every row
// (schemas.Table.Partition). An invalid run, a negative partition or a
// short hash is an error.
func TableObject(run, table, dir string, partition int, sha string) (string, error) {
	if err := ValidRun(run); err != nil {
		return "", err
	}
	if partition < 0 {
		return "", fmt.Errorf("%s: negative %s partition %d", table, dir, partition)
	}
	if len(sha) < 32 {
		return "", fmt.Errorf("%s: content hash %q too short", table, sha)
	}
	return fmt.Sprintf("%spart-%s.parquet", TablePartition(run, table, dir, partition), sha[:32]), nil
}

// TablePartition is the prefix of every object of one partition of run's
// table: runs/<run>/<table>/<dir>-NNNN/.
func TablePartition(run, table, dir string, partition int) string {
	return fmt.Sprintf("%s%s-%04d/", TablePrefix(run, table), dir, partition)
}

// CompactionRecords is the prefix of the compaction records of one
// partition of run's table: runs/<run>/compactions/<table>/<dir>-NNNN/.
func CompactionRecords(run, table, dir string, partition int) string {
	return fmt.Sprintf("%s%s/%s/%s-%04d/", Run(run), KindCompactions, table, dir, partition)
}

// CompactionRecord is the key of a compaction record with content hash
// sha (hex, at least 32 digits):
// runs/<run>/compactions/<table>/<dir>-NNNN/record-<sha[:32]>.json.
func CompactionRecord(run, table, dir string, partition int, sha string) string {
	return CompactionRecords(run, table, dir, partition) + "record-" + sha[:32] + ".json"
}

// Manifest is the key of run's batch manifest of iteration with content
// hash sha (hex, at least 32 digits):
// runs/<run>/batches/iter=NNNN/manifest-<sha[:32]>.json.
func Manifest(run string, iteration int, sha string) string {
	return fmt.Sprintf("%s%s/iter=%04d/manifest-%s.json", Run(run), KindBatches, iteration, sha[:32])
}

// Attempt identifies one attempt of a run: one play of a task by one
// policy version in one iteration, for one purpose.
type Attempt struct {
	Iteration int
	// Purpose is train, eval or sft; Suite names the eval suite, if any.
	Purpose, Suite string
	PolicyVersion  int64
	Task           string
	Attempt        int
}

// Name is the attempt's path below its kind:
// iter=NNNN/<purpose>[-<suite>]/v<policy version>/<task>/a<attempt>. It is
// unique within a run, and also keys the rollout's events.
func (a Attempt) Name() string {
	purpose := a.Purpose
	if a.Suite != "" {
		purpose += "-" + a.Suite
	}
	return fmt.Sprintf("iter=%04d/%s/v%d/%s/a%d", a.Iteration, purpose, a.PolicyVersion, a.Task, a.Attempt)
}

// AttemptMarker is the key of the marker stored once all of an attempt's
// outputs are: runs/<run>/attempts/<attempt>.json.
func AttemptMarker(run string, a Attempt) string {
	return Run(run) + KindAttempts + "/" + a.Name() + ".json"
}

// AttemptTurn is the key of the policy version turn of an attempt sampled
// under stages.rollout.episode_version latest:
// runs/<run>/attempts/<attempt>/turn-NNNNN.json.
func AttemptTurn(run string, a Attempt, turn int) string {
	return fmt.Sprintf("%s%s/%s/turn-%05d.json", Run(run), KindAttempts, a.Name(), turn)
}

// Snapshot is the key of an attempt's final sandbox state:
// runs/<run>/snapshots/<attempt>.tar.
func Snapshot(run string, a Attempt) string {
	return Run(run) + KindSnapshots + "/" + a.Name() + ".tar"
}

// Bundles is the prefix of every task bundle of run: runs/<run>/bundles/.
func Bundles(run string) string { return Run(run) + KindBundles + "/" }

// Bundle is the key of a task's bundle in run:
// runs/<run>/bundles/<task>.tar.gz.
func Bundle(run, task string) string { return Bundles(run) + task + ".tar.gz" }

// BundleTask is the task of a bundle key of run, the inverse of Bundle;
// ok is false for a key that Bundle does not build.
func BundleTask(run, key string) (task string, ok bool) {
	task, ok = strings.CutPrefix(key, Bundles(run))
	if !ok {
		return "", false
	}
	task, ok = strings.CutSuffix(task, ".tar.gz")
	return task, ok && task != ""
}

// Lineage is the key of a task's lineage in run:
// runs/<run>/lineage/<task>.json.
func Lineage(run, task string) string { return Run(run) + KindLineage + "/" + task + ".json" }

// SynthReply is the key of the model's reply that grew a task in run:
// runs/<run>/synth/llm/<task>.json.
func SynthReply(run, task string) string { return Run(run) + KindSynth + "/llm/" + task + ".json" }

// Policy is the prefix of policy version v's checkpoint in run, and the
// key its claim check carries: runs/<run>/policy/vNNNNNN.
func Policy(run string, v int64) string { return fmt.Sprintf("%s%s/v%06d", Run(run), KindPolicy, v) }

// Critics is the prefix of every critic checkpoint of run:
// runs/<run>/critic/.
func Critics(run string) string { return Run(run) + KindCritic + "/" }

// Critic is the prefix of critic version v's checkpoint in run:
// runs/<run>/critic/vNNNNNN.
func Critic(run string, v int64) string { return fmt.Sprintf("%sv%06d", Critics(run), v) }

// FreshCritic is the prefix of the seeded critic that critic version v
// of run starts from when the exec backend trains it (trainer.Exec):
// runs/<run>/critic/fresh-vNNNNNN. Not a version (LatestCritic skips it):
// the job that starts from it warms it up.
func FreshCritic(run string, v int64) string { return fmt.Sprintf("%sfresh-v%06d", Critics(run), v) }

// TrainingReport is the key of the report of the actor update of
// iteration that made policy version v of run:
// runs/<run>/training/iter=NNNN/policy-vNNNNNN.json.
func TrainingReport(run string, iteration int, v int64) string {
	return fmt.Sprintf("%s%s/iter=%04d/policy-v%06d.json", Run(run), KindTraining, iteration, v)
}

// Blob is the key of the demo pipeline's blob i in run:
// runs/<run>/blobs/item-NNNNN.bin.
func Blob(run string, i int) string { return fmt.Sprintf("%s%s/item-%05d.bin", Run(run), KindBlobs, i) }

// Report is the key of run's report as Markdown (t1 report):
// runs/<run>/report.md.
func Report(run string) string { return Run(run) + "report.md" }

// ReportHTML is the key of run's report as a self-contained HTML page
// (t1 report): runs/<run>/report.html.
func ReportHTML(run string) string { return Run(run) + "report.html" }

// Ablation is the key of the Markdown comparison t1 ablate writes on its
// base run: runs/<run>/ablation.md.
func Ablation(run string) string { return Run(run) + "ablation.md" }

// AblationHTML is the key of the HTML comparison t1 ablate writes on its
// base run: runs/<run>/ablation.html.
func AblationHTML(run string) string { return Run(run) + "ablation.html" }
