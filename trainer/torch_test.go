package trainer

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// torchTrainer is the exec backend running t1's PyTorch trainer (t1train)
// with the project's Python environment against the test's store, with
// the settings o.
func torchTrainer(t *testing.T, o ReferenceOptions) *Exec {
	t.Helper()
	py := testinfra.Python(t)
	root := filepath.Dir(filepath.Dir(filepath.Dir(py)))
	c := testinfra.StoreConfig(t)
	env := StoreAccess{Endpoint: c.Endpoint, Secure: c.Secure, Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region,
		AccessKey: c.AccessKey, SecretKey: c.SecretKey}.Env()
	return &Exec{Argv: []string{py, "-m", "t1train", "--job", "{job}", "--out", "{out}"}, Dir: root,
		Env: append(env, "T1TRAIN_WORKDIR="+t.TempDir()), Hyperparameters: o, Store: testinfra.Store(t)}
}

// adopted stores the checkpoint an external trainer wrote in dir under
// prefix and loads it.
func adopted(t *testing.T, dir, prefix string) *moe.Model {
	t.Helper()
	ctx := context.Background()
	st := testinfra.Store(t)
	if err := checkpoint.Adopt(ctx, st, dir, prefix, nil); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(ctx, st, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ck.Model
}

func relDiff(a, b float64) float64 {
	return math.Abs(a-b) / math.Max(math.Abs(a), 1e-12)
}

// The PyTorch trainer (t1train: transformers' Qwen3-MoE with routing
// replay, through the exec protocol) trains as the reference does: on the
// same batch and starting checkpoint, CPU float32, the critic's values,
// advantages and returns agree within 1e-5, the actor's clip fraction and
// routing counts exactly, its loss, KL and gradient norm within 1e-4
// relative, the two updated policies' log-probs within 1e-4 — so too with
// the decoupled objective of a stale batch, whose behaviour KL agrees
// within 1e-5 and truncated fraction exactly — and SFT's first and last
// losses within 1e-4.
func TestTorchTrainerMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the PyTorch trainer: about a minute")
	}
	ctx := context.Background()
	st := testinfra.Store(t)
	_, man, b := rewardedBatch(t, st)
	opts := ReferenceOptions{
		Actor: ActorOptions{Epochs: 2, Minibatches: 2, Clip: 0.2, Adam: adam(3e-3), MaxGradNorm: 1, Replay: true, NormalizeAdvantages: true},
		Critic: CriticOptions{Model: seededCritic(), Adam: adam(1e-3), ValueClip: 0.2, Epochs: 2, MaxGradNorm: 1,
			WarmupSteps: 2, WarmupEV: 0.99},
		SFT: SFTOptions{Adam: adam(1e-3), Schedule: ScheduleCosine, MaxGradNorm: 1, Batch: 2},
	}
	ref, torch := NewReference(st, opts), torchTrainer(t, opts)

	// A fresh critic from the policy's backbone, and a seeded one (critic_init fresh): each warmed up.
	// (Versions apart: the torch trainer's output directories are named by version.)
	for i, c := range []struct{ name, policy string }{{"critic", keys.Policy(run, 0)}, {"seeded_critic", ""}} {
		t.Run(c.name, func(t *testing.T) {
			criticAgrees(t, ref, torch, man, b, c.policy, keys.Critic(run, 1)+"-"+c.name, int64(i+1))
		})
	}

	var torchActor ActorMetrics
	t.Run("actor", func(t *testing.T) {
		want, err := ref.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
		if err != nil {
			t.Fatal(err)
		}
		got, err := torch.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 2), Version: 1})
		if err != nil {
			t.Fatal(err)
		}
		torchActor = got.Metrics
		actorAgrees(t, st, b, want, got, keys.Policy(run, 2))
	})

	// A batch an older policy sampled, trained with the decoupled
	// objective: the sampler's log-probs, moved off the trainer's, are the
	// behaviour policy's, and every action's term is weighted by their
	// truncated ratio, the cap cutting about a third of them.
	t.Run("decoupled actor", func(t *testing.T) {
		stale := *man
		stale.Staleness, stale.TokenFiles = 1, nil
		for _, f := range man.TokenFiles {
			moved, err := rewritten(ctx, st, f, man.Iteration, func(r *schemas.TokenRow) {
				for i, l := range r.LossMask {
					if l {
						r.LogProbs[i] = min(r.LogProbs[i]-[]float32{0.25, -0.2, 0.6}[i%3], 0)
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			stale.TokenFiles = append(stale.TokenFiles, moved)
		}
		o := opts
		o.Actor.ImportanceCap = 1.5
		job := ActorJob{Manifest: &stale, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 6), Version: 1}
		want, err := NewReference(st, o).TrainActor(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if want.Metrics.Truncated == 0 || want.Metrics.Truncated == 1 {
			t.Fatalf("the reference truncated a fraction %g of the weights: the batch does not test the cap", want.Metrics.Truncated)
		}
		// The same store, another output directory (the first actor's
		// job has the same name).
		dec := *torch
		dec.Hyperparameters = o
		dec.Env = append(slices.Clone(torch.Env), "T1TRAIN_WORKDIR="+t.TempDir())
		job.Out = keys.Policy(run, 7)
		got, err := dec.TrainActor(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		wm, gm := want.Metrics, got.Metrics
		t.Logf("behaviour KL: reference %.9g, torch %.9g; truncated: reference %.9g, torch %.9g", wm.BehaviourKL, gm.BehaviourKL, wm.Truncated, gm.Truncated)
		if gm.Truncated != wm.Truncated || gm.Staleness != wm.Staleness || math.Abs(gm.BehaviourKL-wm.BehaviourKL) > 1e-5 {
			t.Fatalf("behaviour statistics: torch %+v, reference %+v", gm, wm)
		}
		actorAgrees(t, st, b, want, got, keys.Policy(run, 7))
	})

	// Once the iteration is sealed its tables are compacted and the objects
	// the manifest names deleted; a replayed update reads their rows from
	// the compacted objects (their records) and trains as before.
	t.Run("actor on the compacted batch", func(t *testing.T) {
		if torchActor.Steps == 0 {
			t.Skip("the actor did not train")
		}
		// Another attempt's objects beside the batch's, so that each
		// partition has more than one to compact.
		it := man.Iteration
		for _, err := range []error{
			rewrite(ctx, st, man.TokenFiles[0], it, func(r *schemas.TokenRow) { r.TaskID += "-other" }),
			rewrite(ctx, st, man.RoutingFiles[0], it, func(r *schemas.RoutingRow) { r.TaskID += "-other" }),
			rewrite(ctx, st, man.RewardFiles[0], it, func(r *schemas.RewardRow) { r.TaskID += "-other" }),
			rewrite(ctx, st, man.TrajectoryFiles[0], it, func(r *schemas.TrajectoryRow) { r.TaskID += "-other" }),
			rewrite(ctx, st, man.ValueFiles[0], it, func(r *schemas.ValueRow) { r.TaskID += "-other" }),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, tbl := range []schemas.Table{schemas.TokensTable, schemas.RoutingTable, schemas.RewardsTable, schemas.TrajectoriesTable, schemas.ValuesTable} {
			if n, err := schemas.Compact(ctx, st, run, tbl, man.Iteration, schemas.WriterOptions{}); err != nil || n < 2 {
				t.Fatalf("%s: compacted %d objects: %v", tbl.Name, n, err)
			}
		}
		if _, _, err := st.Get(ctx, man.TokenFiles[0].Key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the manifest's first tokens object is still stored (%v): nothing was compacted", err)
		}
		// Another output directory: the first run's for this job is taken.
		again := *torch
		again.Env = append(slices.Clone(torch.Env), "T1TRAIN_WORKDIR="+t.TempDir())
		got, err := again.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 5), Version: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got.Metrics != torchActor {
			t.Fatalf("on the compacted batch %+v, before %+v", got.Metrics, torchActor)
		}
	})

	t.Run("sft", func(t *testing.T) {
		job := SFTJob{Run: run, Data: man.TokenFiles, Steps: 3, Policy: keys.Policy(run, 0), Version: 1, Seed: 5}
		job.Out = keys.Policy(run, 3)
		want, err := ref.TrainSFT(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		job.Out = keys.Policy(run, 4)
		got, err := torch.TrainSFT(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		wm, gm := want.Metrics, got.Metrics
		t.Logf("sft: reference %+v, torch %+v", wm, gm)
		if gm.Steps != wm.Steps || gm.Sequences != wm.Sequences || relDiff(wm.FirstLoss, gm.FirstLoss) > 1e-4 || relDiff(wm.Loss, gm.Loss) > 1e-4 {
			t.Fatalf("sft: torch %+v, reference %+v", gm, wm)
		}
	})
}

// actorAgrees fails t unless the torch actor's result got agrees with
// the reference's want on batch b: counts exactly, loss, KL and gradient
// norm within 1e-4 relative, and the updated policies' log-probs (the
// torch one adopted under prefix) within 1e-4.
func actorAgrees(t *testing.T, st store.ObjectStore, b *batch.Batch, want, got *ActorResult, prefix string) {
	t.Helper()
	ctx := context.Background()
	wm, gm := want.Metrics, got.Metrics
	t.Logf("actor: reference %+v", wm)
	t.Logf("actor: torch     %+v", gm)
	if gm.Steps != wm.Steps || gm.Actions != wm.Actions || gm.ClipFraction != wm.ClipFraction ||
		gm.RoutingMismatches != wm.RoutingMismatches || gm.RoutingSets != wm.RoutingSets || gm.LossDrift != 0 || gm.Skipped != wm.Skipped {
		t.Fatalf("counts differ: torch %+v, reference %+v", gm, wm)
	}
	for _, q := range []struct {
		name      string
		want, got float64
	}{{"policy loss", wm.PolicyLoss, gm.PolicyLoss}, {"approx KL", wm.ApproxKL, gm.ApproxKL}, {"grad norm", wm.GradNorm, gm.GradNorm}} {
		t.Logf("%s: reference %.9g, torch %.9g, relative difference %.3g", q.name, q.want, q.got, relDiff(q.want, q.got))
		if relDiff(q.want, q.got) > 1e-4 {
			t.Errorf("%s: torch %g, reference %g", q.name, q.got, q.want)
		}
	}
	refCk, err := checkpoint.Load(ctx, st, want.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(got.Checkpoint) {
		t.Fatalf("torch checkpoint %q is not a local directory", got.Checkpoint)
	}
	if _, err := os.Stat(filepath.Join(got.Checkpoint, "optimizer.safetensors")); err != nil {
		t.Fatal(err)
	}
	torchM := adopted(t, got.Checkpoint, prefix)
	var worst float64
	for _, c := range b.Chunks() {
		o := moe.ForwardOptions{Temperature: float64(c.Tokens.Temperature)}
		pw, err := refCk.Model.Forward(c.IDs(), o)
		if err != nil {
			t.Fatal(err)
		}
		pg, err := torchM.Forward(c.IDs(), o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pw.LogProbs {
			worst = math.Max(worst, math.Abs(float64(pw.LogProbs[i])-float64(pg.LogProbs[i])))
		}
	}
	t.Logf("updated policies: largest log-prob difference %.3g", worst)
	if worst > 1e-4 {
		t.Fatalf("the updated policies' log-probs differ by %g", worst)
	}
}

// Two ranks under torchrun save one checkpoint, each writing its own rows,
// in weight shards under an index and one optimizer file: t1 adopts it,
// loads it with its optimiser state, and resumes from it; its weights are
// one process's.
func TestTorchTrainerSavesAcrossRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the PyTorch trainer on two ranks: about a minute")
	}
	ctx := context.Background()
	st := testinfra.Store(t)
	_, man, _ := rewardedBatch(t, st)
	opts := ReferenceOptions{Actor: ActorOptions{Epochs: 1, Minibatches: 1, Clip: 0.2, Adam: adam(3e-3), MaxGradNorm: 1, Replay: true}}
	one, two := torchTrainer(t, opts), torchTrainer(t, opts)
	py := testinfra.Python(t)
	two.Argv = []string{filepath.Join(filepath.Dir(py), "torchrun"), "--standalone", "--nproc-per-node", "2", "-m", "t1train", "--job", "{job}", "--out", "{out}"}
	// Shards of at most 200 kB: the test policy's weights take several.
	two.Env = append(slices.Clone(two.Env), "T1TRAIN_DEVICE=cpu", "T1TRAIN_SHARD_BYTES=200000", "OMP_NUM_THREADS=1")
	job := ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Version: 1}
	job.Out = keys.Policy(run, 1) + "-one-rank"
	a, err := one.TrainActor(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	job.Out = keys.Policy(run, 1) + "-two-ranks"
	b, err := two.TrainActor(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if a.Metrics.Steps != b.Metrics.Steps || relDiff(a.Metrics.PolicyLoss, b.Metrics.PolicyLoss) > 1e-5 {
		t.Fatalf("two ranks %+v, one %+v", b.Metrics, a.Metrics)
	}
	ib, err := os.ReadFile(filepath.Join(b.Checkpoint, moe.WeightsIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	shards, err := moe.WeightShards(ib)
	if err != nil || len(shards) < 2 {
		t.Fatalf("two ranks wrote %d weight shards (%v), want several under an index", len(shards), err)
	}
	load := func(dir, prefix string) *moe.Checkpoint {
		if err := checkpoint.Adopt(ctx, st, dir, prefix, nil); err != nil {
			t.Fatal(err)
		}
		ck, err := checkpoint.Load(ctx, st, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Optimizer == nil {
			t.Fatalf("%s: no optimiser state", dir)
		}
		return ck
	}
	ca, cb := load(a.Checkpoint, keys.Policy(run, 1)+"-one-rank-adopted"), load(b.Checkpoint, keys.Policy(run, 1)+"-two-ranks-adopted")
	var worst, largest float64
	for i, ta := range ca.Model.W.Tensors {
		tb := cb.Model.W.Tensors[i]
		for j := range ta.Data {
			worst = math.Max(worst, math.Abs(float64(ta.Data[j])-float64(tb.Data[j])))
			largest = math.Max(largest, math.Abs(float64(ta.Data[j])))
		}
	}
	t.Logf("%d weight shards; largest weight difference from one rank's %.3g (largest weight %.3g)", len(shards), worst, largest)
	if worst > 1e-4*largest { // summation order, through one Adam step
		t.Fatalf("two ranks' weights differ from one's by %g", worst)
	}
	// The reference resumes from it, optimiser state and all.
	ref := NewReference(st, opts)
	if _, err := ref.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 1) + "-two-ranks-adopted", Out: keys.Policy(run, 2) + "-resumed", Version: 2}); err != nil {
		t.Fatal(err)
	}
}

// seededCritic is the shape of a fresh critic with a seed of its own, so
// that it is not the policy's backbone under a zero head.
func seededCritic() moe.Config {
	c := moe.DefaultConfig()
	c.Seed = 7
	return c
}

// criticAgrees trains a fresh critic (from policy, or seeded when it is
// "") with both trainers, to out-reference and out-torch, and holds the
// torch one's values, advantages and returns to the reference's within
// 1e-5, its metrics within 1e-4.
func criticAgrees(t *testing.T, ref *Reference, torch *Exec, man *schemas.BatchManifest, b *batch.Batch, policy, out string, version int64) {
	ctx := context.Background()
	gae := GAE{Gamma: 1, Lambda: 0.95}
	want, err := ref.TrainCritic(ctx, CriticJob{Manifest: man, Policy: policy, Out: out + "-reference", Version: version, GAE: gae})
	if err != nil {
		t.Fatal(err)
	}
	got, err := torch.TrainCritic(ctx, CriticJob{Manifest: man, Policy: policy, Out: out + "-torch", Version: version, GAE: gae})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.ValueRows(b, got.Values, 1); err != nil {
		t.Fatalf("the torch critic's values do not fit the batch: %v", err)
	}
	var worst float64
	for i, w := range want.Values {
		g := got.Values[i]
		if g.TaskID != w.TaskID || g.Attempt != w.Attempt || g.Chunk != w.Chunk {
			t.Fatalf("chunk %d: torch %s/%d/%d, reference %s/%d/%d", i, g.TaskID, g.Attempt, g.Chunk, w.TaskID, w.Attempt, w.Chunk)
		}
		for _, p := range [][2][]float32{{w.Values, g.Values}, {w.Advantages, g.Advantages}, {w.Returns, g.Returns}} {
			for j := range p[0] {
				worst = math.Max(worst, math.Abs(float64(p[0][j])-float64(p[1][j])))
			}
		}
	}
	t.Logf("critic: largest difference of values, advantages, returns %.3g; reference %+v, torch %+v", worst, want.Metrics, got.Metrics)
	if worst > 1e-5 {
		t.Fatalf("values, advantages or returns differ by %g", worst)
	}
	wm, gm := want.Metrics, got.Metrics
	if gm.Steps != wm.Steps || gm.Warmup != wm.Warmup || gm.WarmupSteps != wm.WarmupSteps || gm.WarmupEnd != wm.WarmupEnd ||
		math.Abs(gm.ExplainedVariance-wm.ExplainedVariance) > 1e-4 || relDiff(wm.ValueLoss, gm.ValueLoss) > 1e-4 {
		t.Fatalf("critic metrics: torch %+v, reference %+v", gm, wm)
	}
}

// The PyTorch trainer's own unit tests (t1train/tests) run with the
// project's Python environment.
func TestTorchTrainerUnits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pytest over t1train: about 30 s")
	}
	py := testinfra.Python(t)
	cmd := exec.Command(py, "-m", "pytest", "t1train/tests", "-q", "-p", "no:cacheprovider")
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(py)))
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("pytest t1train/tests: %v", err)
	}
}

// The store reaches an exec command as URL, bucket, prefix, region and
// keys, or as a local directory.
func TestStoreAccessEnv(t *testing.T) {
	got := StoreAccess{Endpoint: "127.0.0.1:9000", Bucket: "t1-data", Prefix: "/team/a/", Region: "us-east-1", AccessKey: "k", SecretKey: "s"}.Env()
	want := []string{"T1_STORE_ENDPOINT=http://127.0.0.1:9000", "T1_STORE_BUCKET=t1-data", "T1_STORE_PREFIX=team/a", "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"}
	if !slices.Equal(got, want) {
		t.Fatalf("env %q, want %q", got, want)
	}
	if got := (StoreAccess{Endpoint: "s3.example.com", Secure: true, Bucket: "b"}).Env(); !slices.Equal(got, []string{"T1_STORE_ENDPOINT=https://s3.example.com", "T1_STORE_BUCKET=b"}) {
		t.Fatalf("env %q", got)
	}
	if got := (StoreAccess{Dir: "/data/s3/t1-data"}).Env(); !slices.Equal(got, []string{"T1_STORE_DIR=/data/s3/t1-data"}) {
		t.Fatalf("env %q", got)
	}
}

// rewrite stores ref's rows, changed by change, as another object of the
// same table partition.
func rewrite[T schemas.Row](ctx context.Context, st store.ObjectStore, ref schemas.FileRef, partition int, change func(*T)) error {
	_, err := rewritten(ctx, st, ref, partition, change)
	return err
}

// rewritten is rewrite that returns the new object's reference.
func rewritten[T schemas.Row](ctx context.Context, st store.ObjectStore, ref schemas.FileRef, partition int, change func(*T)) (schemas.FileRef, error) {
	rows, err := schemas.ReadRows[T](ctx, st, ref.Key, &ref)
	if err != nil {
		return schemas.FileRef{}, err
	}
	for i := range rows {
		change(&rows[i])
	}
	return schemas.WriteTable(ctx, st, run, partition, rows, schemas.WriterOptions{})
}
