// Package demo is a two-stage smoke pipeline over the real engine, bus and
// object store: a producer writes seeded blobs to the store and announces
// each with a claim-check event; a verifier reads every blob back and
// checks its hash. It exercises what every real stage relies on (derived
// ids, emit-then-ack, object keys that are deterministic, bad input as a
// permanent failure) at a size that runs anywhere.
//
// Events:
//
//	demo.started   {count, payload_bytes, seed}       → producer (fans out)
//	demo.chunk     {first, count, payload_bytes, seed} → producer (writes blobs)
//	demo.item      {index, key, size, sha256}         → verifier
//	demo.verified  {index, key, sha256}
package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/store"
)

// Event types.
const (
	Started  = "demo.started"
	Chunk    = "demo.chunk"
	Item     = "demo.item"
	Verified = "demo.verified"
)

// MaxPayloadBytes bounds one blob, so a hostile demo.started cannot make the
// producer allocate without limit.
const MaxPayloadBytes = 64 << 20

// StartedPayload asks the producer for Count blobs of PayloadBytes.
type StartedPayload struct {
	Count        int    `json:"count"`
	PayloadBytes int    `json:"payload_bytes"`
	Seed         uint64 `json:"seed"`
}

// ChunkSize is how many blobs one demo.chunk covers: small enough that
// progress shows early and chunks spread over handlers.
const ChunkSize = 50

// ChunkPayload asks the producer for blobs First..First+Count-1.
type ChunkPayload struct {
	First        int    `json:"first"`
	Count        int    `json:"count"`
	PayloadBytes int    `json:"payload_bytes"`
	Seed         uint64 `json:"seed"`
}

// ItemPayload is the claim check for one blob.
type ItemPayload struct {
	Index  int    `json:"index"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// VerifiedPayload records a blob read back intact.
type VerifiedPayload struct {
	Index  int    `json:"index"`
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// Blob returns blob i's bytes, a pure function of seed and i, so a
// redelivered producer rewrites identical objects.
func Blob(seed uint64, i, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	b := make([]byte, size)
	for j := 0; j < size; j += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(b[j:], w[:])
	}
	return b
}

// Producer splits a demo.started into chunks, then writes each chunk's
// blobs and emits one demo.item per blob.
func Producer(s store.ObjectStore) engine.Stage {
	return engine.NewStage("demo-producer", []string{Started, Chunk}, func(ctx context.Context, ev engine.Event, out engine.Emitter) error {
		if ev.Type == Started {
			return fanOut(ev, out)
		}
		var c ChunkPayload
		if err := ev.Decode(&c); err != nil {
			return err
		}
		if c.First < 0 || c.Count < 0 || c.Count > ChunkSize || c.PayloadBytes < 0 || c.PayloadBytes > MaxPayloadBytes {
			return engine.Permanent(fmt.Errorf("demo.chunk: first %d, count %d (at most %d), payload_bytes %d (at most %d) out of range",
				c.First, c.Count, ChunkSize, c.PayloadBytes, MaxPayloadBytes))
		}
		for i := c.First; i < c.First+c.Count; i++ {
			blob := Blob(c.Seed, i, c.PayloadBytes)
			sum := sha256.Sum256(blob)
			key := keys.Blob(ev.Run, i)
			if _, err := s.Put(ctx, key, bytes.NewReader(blob), int64(len(blob)), store.PutOptions{ContentType: "application/octet-stream"}); err != nil {
				return err
			}
			if _, err := out.Emit(Item, ItemPayload{Index: i, Key: key, Size: int64(len(blob)), SHA256: hex.EncodeToString(sum[:])},
				engine.WithKey(strconv.Itoa(i))); err != nil {
				return err
			}
		}
		return nil
	})
}

func fanOut(ev engine.Event, out engine.Emitter) error {
	var p StartedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	if p.Count < 0 || p.Count > 10_000_000 || p.PayloadBytes < 0 || p.PayloadBytes > MaxPayloadBytes {
		return engine.Permanent(fmt.Errorf("demo.started: count %d (at most 10000000) and payload_bytes %d (at most %d) out of range",
			p.Count, p.PayloadBytes, MaxPayloadBytes))
	}
	for first := 0; first < p.Count; first += ChunkSize {
		c := ChunkPayload{First: first, Count: min(ChunkSize, p.Count-first), PayloadBytes: p.PayloadBytes, Seed: p.Seed}
		if _, err := out.Emit(Chunk, c, engine.WithKey(strconv.Itoa(first))); err != nil {
			return err
		}
	}
	return nil
}

// Verifier reads each blob back and checks size and hash. A mismatch or a
// missing object is permanent: retrying cannot fix it.
func Verifier(s store.ObjectStore) engine.Stage {
	return engine.NewStage("demo-verifier", []string{Item}, func(ctx context.Context, ev engine.Event, out engine.Emitter) error {
		var p ItemPayload
		if err := ev.Decode(&p); err != nil {
			return err
		}
		rc, _, err := s.Get(ctx, p.Key)
		if errors.Is(err, store.ErrNotFound) {
			return engine.Permanent(fmt.Errorf("demo.item %d: object %s is missing", p.Index, p.Key))
		}
		if err != nil {
			return err
		}
		defer rc.Close()
		h := sha256.New()
		n, err := io.Copy(h, rc)
		if err != nil {
			return fmt.Errorf("read %s: %w", p.Key, err)
		}
		got := hex.EncodeToString(h.Sum(nil))
		if n != p.Size || got != p.SHA256 {
			return engine.Permanent(fmt.Errorf("demo.item %d: %s has %d bytes sha256 %s, event claims %d bytes sha256 %s",
				p.Index, p.Key, n, got, p.Size, p.SHA256))
		}
		_, err = out.Emit(Verified, VerifiedPayload{Index: p.Index, Key: p.Key, SHA256: got}, engine.WithKey(strconv.Itoa(p.Index)))
		return err
	})
}

// Stages returns the demo pipeline's stages.
func Stages(s store.ObjectStore) []engine.Stage { return []engine.Stage{Producer(s), Verifier(s)} }
