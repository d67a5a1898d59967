package harbor

import (
	"bytes"
	"path/filepath"
	"testing"
)

func BenchmarkLoad(b *testing.B) {
	dir := filepath.Join("testdata", "tasks", "word-freq")
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTask is word-freq plus 4 MiB of seeded pseudo-random environment
// data, the size of a typical Terminal-Bench asset.
func benchTask(b *testing.B) *Task {
	task, err := Load(filepath.Join("testdata", "tasks", "word-freq"))
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4<<20)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range data {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = byte(x)
	}
	task.Files["environment/blob.bin"] = File{Mode: 0o644, Data: data}
	return task
}

func BenchmarkHash(b *testing.B) {
	task := benchTask(b)
	b.SetBytes(4 << 20)
	for b.Loop() {
		if _, err := task.Hash(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBundle(b *testing.B) {
	task := benchTask(b)
	b.SetBytes(4 << 20)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if _, err := task.Bundle(&buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadBundle(b *testing.B) {
	data, _, err := benchTask(b).BundleBytes()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 << 20)
	for b.Loop() {
		if _, err := ReadBundle(bytes.NewReader(data), "bench", DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}
