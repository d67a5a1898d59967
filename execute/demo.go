package execute

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/stages/demo"
)

// DemoSummary is how a demo run ended, as `t1 demo` prints it.
type DemoSummary struct {
	Run       string        `json:"run"`
	Requested int           `json:"requested"`
	Produced  uint64        `json:"produced"`
	Verified  uint64        `json:"verified"`
	Failed    uint64        `json:"failed"`
	Dead      uint64        `json:"dead_letters"`
	Bytes     int64         `json:"bytes"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Report    string        `json:"report"`
	ReportKey string        `json:"report_key"`
}

// Demo runs the two-stage smoke pipeline of in.Config's run to its end in
// this process, writing progress to w, and returns its summary once the
// report is written; nil when ctx ends first (a later call resumes it).
// A run some of whose events failed returns its summary with an error
// naming where the reasons are.
func Demo(ctx context.Context, w io.Writer, in *local.Infra) (*DemoSummary, error) {
	cfg := in.Config
	run := cfg.Run.ID
	dc := cfg.Stages.Demo
	started := demo.StartedPayload{Count: dc.Count, PayloadBytes: dc.PayloadBytes, Seed: cfg.Run.Seed}
	hash := pipeline.ConfigHash(started)

	stageCtx, stopStages := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopStages(); wg.Wait() }()
	errs := make(chan error, 2)
	for _, s := range demo.Stages(in.Store) {
		r := engine.NewRunner(in.Log, s, cfg.Engine.Runner(hash))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(stageCtx); err != nil {
				errs <- fmt.Errorf("stage %s: %w", s.Name(), err)
			}
		}()
	}

	// The root event is published once per run: a resumed run finds it and
	// carries on from what the log already holds.
	root, err := engine.NewRootEvent(run, demo.Started, hash, started)
	if err != nil {
		return nil, err
	}
	exists, err := in.Log.HasEvent(ctx, run, demo.Started)
	if err != nil {
		return nil, err
	}
	if !exists {
		if _, err := in.Log.Publish(ctx, root); err != nil {
			return nil, err
		}
	}

	begin := time.Now()
	progress := newDemoProgress(w, dc.Count)
	var sum DemoSummary
	var counts map[string]uint64
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	poller := newCountPoller(in.Log, run)
	for {
		var err error
		if counts, err = poller.poll(ctx); err != nil {
			return nil, err
		}
		sum = DemoSummary{
			Run: run, Requested: dc.Count,
			Produced: counts[demo.Item], Verified: counts[demo.Verified],
			Failed: counts[engine.FailedType(demo.Item)] + counts[engine.FailedType(demo.Chunk)] + counts[engine.FailedType(demo.Started)],
		}
		progress.update(sum, time.Since(begin))
		done := int(sum.Verified+counts[engine.FailedType(demo.Item)])+demo.ChunkSize*int(counts[engine.FailedType(demo.Chunk)]) >= dc.Count || counts[engine.FailedType(demo.Started)] > 0
		if done {
			break
		}
		select {
		case <-ctx.Done():
			progress.finish()
			fmt.Fprintf(w, "stopped at %d/%d verified; run `t1 demo` again to resume\n", sum.Verified, dc.Count)
			return nil, nil
		case err := <-errs:
			return nil, err
		case <-tick.C:
		}
	}
	progress.finish()
	sum.Elapsed = time.Since(begin)
	sum.Bytes = int64(sum.Verified) * int64(dc.PayloadBytes)
	dead, err := in.Log.DeadLetterCounts(ctx, run)
	if err != nil {
		return nil, err
	}
	sum.Dead = dead.Total()
	sum.ReportKey = keys.Report(run)
	if sum.Report, err = in.WriteRunFile(ctx, run, "", sum.ReportKey, "text/markdown", []byte(renderReport(sum))); err != nil {
		return nil, err
	}
	if sum.Failed > 0 {
		var hints []string
		for _, typ := range []string{demo.Started, demo.Chunk, demo.Item} {
			if counts[engine.FailedType(typ)] > 0 {
				hints = append(hints, "t1 events list --run "+run+" --type "+engine.FailedType(typ))
			}
		}
		return &sum, fmt.Errorf("run %s: %d events failed; reasons: %s", run, sum.Failed, strings.Join(hints, "; "))
	}
	return &sum, nil
}

type demoProgress struct {
	w     io.Writer
	total int
	tty   bool
	last  time.Time
}

func newDemoProgress(w io.Writer, total int) *demoProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &demoProgress{w: w, total: total, tty: tty}
}

func (p *demoProgress) update(s DemoSummary, elapsed time.Duration) {
	if !p.tty && time.Since(p.last) < 5*time.Second && int(s.Verified) < p.total {
		return // logs and CI get a line every few seconds, terminals a live line
	}
	p.last = time.Now()
	rate := float64(s.Verified) / elapsed.Seconds()
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(p.total-int(s.Verified))/rate) * time.Second / time.Second).Round(time.Second).String()
	}
	line := fmt.Sprintf("[%s] stage demo-producer: %d/%d produced · stage demo-verifier: %d/%d verified · %d failed · %.0f items/s · ETA %s",
		elapsed.Round(time.Second), s.Produced, p.total, s.Verified, p.total, s.Failed, rate, eta)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *demoProgress) finish() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

// WriteText prints s as `t1 demo` ends.
func (s DemoSummary) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", s.Run)
	fmt.Fprintf(tw, "requested\t%d\n", s.Requested)
	fmt.Fprintf(tw, "produced\t%d\n", s.Produced)
	fmt.Fprintf(tw, "verified\t%d\n", s.Verified)
	fmt.Fprintf(tw, "failed\t%d\n", s.Failed)
	fmt.Fprintf(tw, "dead letters\t%d\n", s.Dead)
	fmt.Fprintf(tw, "bytes verified\t%d\n", s.Bytes)
	fmt.Fprintf(tw, "elapsed\t%s\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "report\t%s (object %s)\n", s.Report, s.ReportKey)
	tw.Flush()
}

func renderReport(s DemoSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# t1 run %s\n\n", s.Run)
	b.WriteString("Demo pipeline: producer writes seeded blobs to the object store, verifier reads each back and checks its SHA-256.\n\n")
	b.WriteString("| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| requested | %d |\n| produced | %d |\n| verified | %d |\n| failed | %d |\n| dead letters | %d |\n| bytes verified | %d |\n",
		s.Requested, s.Produced, s.Verified, s.Failed, s.Dead, s.Bytes)
	return b.String()
}
