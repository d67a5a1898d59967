package schemas

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/t1pipe/t1/schemas/routing"
)

// benchTokens makes n chunks of 2048 tokens each, with realistic-looking
// ids (a 64k vocab), log-probs and a loss mask over half the tokens.
func benchTokens(n int) []TokenRow {
	rng := rand.New(rand.NewPCG(21, 22))
	rows := make([]TokenRow, n)
	for i := range rows {
		const T = 2048
		r := TokenRow{Run: "bench", TaskID: fmt.Sprintf("task-%04d", i/4), Attempt: int32(i % 4), Chunk: int32(i % 3),
			TokenIDs: make([]int32, T), LogProbs: make([]float32, T), LossMask: make([]bool, T), DriftRepair: RepairStrictPrefix}
		for j := range T {
			r.TokenIDs[j] = int32(rng.IntN(65536))
			if j%64 >= 32 {
				r.LossMask[j] = true
				r.LogProbs[j] = -float32(rng.ExpFloat64())
			}
			if j%256 == 0 {
				r.TurnOffsets = append(r.TurnOffsets, int32(j))
			}
		}
		rows[i] = r
	}
	return rows
}

// BenchmarkTokensTable: writing (spool + zstd + PutIfAbsent to the
// embedded store) and reading back (parquet-go rows; arrow-go's table is
// BenchmarkTokensTableArrow) 256 chunks of 2048 tokens. Rows are chunks; tokens/s = rows/s × 2048.
func BenchmarkTokensTable(b *testing.B) {
	ctx := context.Background()
	st := openStore(b)
	rows := benchTokens(256)
	b.Run("write", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			rows[0].Attempt = int32(1000 + i) // fresh content, fresh key
			if _, err := WriteTable(ctx, st, "bench", 0, rows, WriterOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	rows[0].Attempt = 0
	ref, err := WriteTable(ctx, st, "bench", 0, rows, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read-rows", func(b *testing.B) {
		for b.Loop() {
			if _, err := ReadRows[TokenRow](ctx, st, ref.Key, &ref); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(ref.Bytes)/(256*2048), "file-B/token")
	})
}

// fsbRow stores one token's routing (48 layers × top-8, uint8) as a
// fixed-size binary value, the best plain-Parquet option measured for
// routing ids (it compresses and reads best).
type fsbRow struct {
	IDs [384]byte `parquet:"ids"`
}

// BenchmarkRoutingStorage compares, for 4096 tokens of a 48-layer top-8
// 256-expert model, the bytes per token and write/read speed of the
// routing table with codec records (auto, packed) and of a plain
// parquet-go fixed-size-binary column compressed with zstd.
func BenchmarkRoutingStorage(b *testing.B) {
	const T, L, K, E = 4096, 48, 8, 256
	rng := rand.New(rand.NewPCG(31, 32))
	uni, err := routing.Uniform(rng, T, L, K, E)
	if err != nil {
		b.Fatal(err)
	}
	cor, err := routing.Correlated(rng, T, L, K, E, 0.8, 1.1)
	if err != nil {
		b.Fatal(err)
	}
	for _, dist := range []struct {
		name string
		rec  *routing.Record
	}{{"uniform", uni}, {"correlated", cor}} {
		raw := int64(dist.rec.RawBytes())
		for _, enc := range []routing.Encoding{routing.Auto, routing.Packed} {
			b.Run(fmt.Sprintf("%s/table-%s", dist.name, enc), func(b *testing.B) {
				var size int
				b.SetBytes(raw)
				for b.Loop() {
					row, err := NewRoutingRow("bench", "t", 0, 0, dist.rec, enc)
					if err != nil {
						b.Fatal(err)
					}
					data := writeLocal(b, []RoutingRow{row})
					size = len(data)
					o, err := Parse("bench", data, nil, "routing")
					if err != nil {
						b.Fatal(err)
					}
					got, err := DecodeRows[RoutingRow](o)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := got[0].Decode(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(size)/T, "B/token")
			})
		}
		b.Run(dist.name+"/parquet-go-fsb-zstd", func(b *testing.B) {
			rows := make([]fsbRow, T)
			for t := range rows {
				copy(rows[t].IDs[:], dist.rec.IDs[t*L*K:(t+1)*L*K])
			}
			var size int
			b.SetBytes(raw)
			for b.Loop() {
				var buf bytes.Buffer
				w := parquet.NewGenericWriter[fsbRow](&buf, parquet.Compression(&zstd.Codec{Level: zstd.SpeedBetterCompression}))
				if _, err := w.Write(rows); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				size = buf.Len()
				got, err := parquet.Read[fsbRow](bytes.NewReader(buf.Bytes()), int64(buf.Len()))
				if err != nil || len(got) != T {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size)/T, "B/token")
		})
	}
}

// writeLocal encodes rows as the Writer does, in memory.
func writeLocal[T Row](b *testing.B, rows []T) []byte {
	var zero T
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, writerOptions(zero.Table(), WriterOptions{RowGroupRows: 256, ZstdLevel: DefaultZstdLevel})...)
	if _, err := w.Write(rows); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}
