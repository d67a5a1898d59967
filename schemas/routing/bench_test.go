package routing

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

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
				b.SetBytes(int64(r.RawBytes()))
				for b.Loop() {
					var err error
					out, err = Encode(out[:0], r, enc)
					if err != nil {
						b.Fatal(err)
					}
				}
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
				b.SetBytes(int64(r.RawBytes()))
				for b.Loop() {
					if _, err := Decode(buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
