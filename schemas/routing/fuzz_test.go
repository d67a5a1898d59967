package routing

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// FuzzDecode: arbitrary bytes never panic the decoder, and whatever it
// accepts is a valid record that encodes back to an equal record.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range [][4]int{{3, 2, 2, 8}, {5, 3, 4, 300}, {1, 1, 1, 2}, {0, 1, 1, 3}} {
		r, err := Correlated(rng, sh[0], sh[1], sh[2], sh[3], 0.7, 1.0)
		if err != nil {
			f.Fatal(err)
		}
		for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta} {
			b, err := Encode(nil, r, enc)
			if err == nil {
				f.Add(b)
				f.Add(b[:len(b)-4]) // a body: the target appends its checksum
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Keep the fuzzer's allocations small: the decoder trusts a
		// header up to MaxRawBytes.
		if info, err := ReadInfo(b); err == nil && info.Tokens*info.Layers*info.TopK*Width(info.Experts) > 1<<22 {
			return
		}
		decodeAny(t, b)
		// With a valid checksum the mutations reach the decoders proper.
		decodeAny(t, binary.LittleEndian.AppendUint32(append([]byte{}, b...), crc32.Checksum(b, crcTable)))
	})
}

func decodeAny(t *testing.T, b []byte) {
	{
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded an invalid record: %v", err)
		}
		again, err := Encode(nil, r, Encoding(b[1]))
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Decode(again)
		if err != nil || !r2.Equal(r) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	}
}

// FuzzRoundTrip: every shape and encoding round-trips.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint16(10), uint8(4), uint8(8), uint16(256), uint8(200))
	f.Add(uint64(2), uint16(3), uint8(1), uint8(1), uint16(2), uint8(0))
	f.Add(uint64(3), uint16(7), uint8(3), uint8(64), uint16(65535), uint8(255))
	f.Add(uint64(4), uint16(0), uint8(2), uint8(5), uint16(5), uint8(100))
	f.Add(uint64(5), uint16(40), uint8(2), uint8(16), uint16(1024), uint8(230))
	f.Fuzz(func(t *testing.T, seed uint64, tokens uint16, layers, topK uint8, experts uint16, keep uint8) {
		T, L, k, E := int(tokens%200), int(layers%8)+1, int(topK%MaxTopK)+1, int(experts)+1
		if k > E {
			k = E
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		r, err := Correlated(rng, T, L, k, E, float64(keep)/256, 1.0)
		if err != nil {
			t.Fatal(err)
		}
		for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta, Auto} {
			b, err := Encode(nil, r, enc)
			if (enc == Rank || enc == Delta) && !Rankable(k, E) {
				if err == nil {
					t.Fatalf("%s accepted unrankable %d-of-%d", enc, k, E)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", enc, err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("%s %dx%dx%d/%d: %v", enc, T, L, k, E, err)
			}
			if !got.Equal(r) {
				t.Fatalf("%s %dx%dx%d/%d: round trip differs", enc, T, L, k, E)
			}
		}
	})
}
