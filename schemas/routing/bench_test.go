package routing

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time of the calling OS thread. On a shared
// machine wall-clock throughput mostly measures the neighbours; CPU time
// of the benchmark's (locked) thread measures the codec.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD, Linux
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs fn b.N times on a locked thread and reports raw MB per
// CPU-second of that thread.
func measure(b *testing.B, raw int, fn func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(raw))
	start := threadCPU()
	n := 0
	for b.Loop() {
		fn()
		n++
	}
	if cpu := threadCPU() - start; cpu > 0 {
		b.ReportMetric(float64(raw)*float64(n)/cpu.Seconds()/1e6, "cpuMB/s")
	}
}

// benchRecords are 1024-token chunks of a 48-layer, top-8, 256-expert
// model: uniform (worst case) and router-like (Zipf popularity, experts
// kept from the previous token with probability 0.8).
func benchRecords(b *testing.B) map[string]*Record {
	rng := rand.New(rand.NewPCG(7, 8))
	u, err := Uniform(rng, 1024, 48, 8, 256)
	if err != nil {
		b.Fatal(err)
	}
	c, err := Correlated(rng, 1024, 48, 8, 256, 0.8, 1.1)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]*Record{"uniform": u, "correlated": c}
}

func BenchmarkEncode(b *testing.B) {
	recs := benchRecords(b)
	for _, dist := range []string{"uniform", "correlated"} {
		r := recs[dist]
		for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta, Auto} {
			b.Run(fmt.Sprintf("%s/%s", dist, enc), func(b *testing.B) {
				var out []byte
				measure(b, r.RawBytes(), func() {
					var err error
					out, err = Encode(out[:0], r, enc)
					if err != nil {
						b.Fatal(err)
					}
				})
				b.ReportMetric(float64(len(out))/float64(r.Tokens), "B/token")
				b.ReportMetric(float64(len(out))/float64(r.RawBytes()), "ratio")
			})
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	recs := benchRecords(b)
	for _, dist := range []string{"uniform", "correlated"} {
		r := recs[dist]
		for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta} {
			buf, err := Encode(nil, r, enc)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/%s", dist, enc), func(b *testing.B) {
				measure(b, r.RawBytes(), func() {
					if _, err := Decode(buf); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}
