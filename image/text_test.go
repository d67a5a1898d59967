package image

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestResultWriteText(t *testing.T) {
	r := &Result{Mapping: "FROM ubuntu:24.04 → debian bookworm", Size: 3 << 20, Keys: []string{"0123456789abcdef", "fedcba9876543210"}, Steps: []Step{
		{Instruction: "debootstrap bookworm", Key: "0123456789abcdef", Size: 2 << 20, Duration: time.Second, Cached: true},
		{Instruction: "ENV A=1"},
		{Instruction: "RUN true", Key: "fedcba9876543210", Size: 1 << 20},
	}}
	var b bytes.Buffer
	if err := r.WriteText(&b, true, 1); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"debian bookworm\n", "0123456789ab  cached  2.0 MiB  1.0s  debootstrap", "fedcba987654  built", "2 layers, 1 cache hits, 3.0 MiB\n", "pushed 1 layers (1 already stored)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("lacks %q:\n%s", want, b.String())
		}
	}
}
