package report

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// BenchmarkLoad reads a two-iteration run (events, metrics of schema 1.0
// and 1.1, trajectories, rewards, eval results, training reports) from an
// embedded NATS server and the embedded S3 gateway.
func BenchmarkLoad(b *testing.B) {
	l, st := testinfra.Log(b), testinfra.Store(b)
	fixture{run: "bench", replay: true, gap: 0.013}.seed(b, l, st)
	for b.Loop() {
		if _, err := Load(context.Background(), l, st, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRender renders testdata/ablation.json (a run and a variant):
// both documents, every plot drawn as SVG.
func BenchmarkRender(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "testdata", "ablation.json"))
	if err != nil {
		b.Fatal(err)
	}
	var runs []*Run
	if err := json.Unmarshal(data, &runs); err != nil {
		b.Fatal(err)
	}
	var size int
	for b.Loop() {
		md, html, err := Render(runs)
		if err != nil {
			b.Fatal(err)
		}
		size = len(md) + len(html)
	}
	b.ReportMetric(float64(size), "bytes/report")
}
