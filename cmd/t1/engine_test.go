package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// `t1 run` with a remote engine nobody serves fails before anything
// starts, in one line naming the URL, rather than sampling from the
// in-process model the configuration did not ask for.
func TestRunRefusesAnUnreachableEngine(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // a port nobody listens on
	for _, backend := range []string{"sglang", "vllm"} {
		data := t.TempDir()
		cfg := writeConfig(t, fmt.Sprintf("run:\n  id: closed\ninference:\n  backend: %s\n  url: %s\n  checkpoint: /models/m\n  weights_dir: %s\n",
			backend, url, t.TempDir()))
		_, err := t1(t, "run", "--data", data, "--config", cfg, "--log-level", "warn")
		if err == nil {
			t.Fatalf("%s: t1 run started with no engine at %s", backend, url)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, url) || !strings.Contains(msg, backend) {
			t.Fatalf("%s: want one line naming the backend and %s, got %q", backend, url, msg)
		}
		// Nothing was started: no embedded NATS or S3 under the data directory.
		if entries, _ := os.ReadDir(data); len(entries) != 0 {
			t.Fatalf("%s: the data directory holds %v", backend, entries)
		}
	}
}
