package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

func TestDeadHere(t *testing.T) {
	host, _ := os.Hostname()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		holder string
		dead   bool
	}{
		{fmt.Sprintf("%s pid %d at 2026-12-01T00:00:00Z", host, gone.Process.Pid), true},
		{fmt.Sprintf("%s pid %d at 2026-12-01T00:00:00Z", host, os.Getppid()), false},
		{fmt.Sprintf("%s pid %d at 2026-12-01T00:00:00Z", host, os.Getpid()), false},
		{fmt.Sprintf("%s-elsewhere pid %d at 2026-12-01T00:00:00Z", host, gone.Process.Pid), false},
		{"job-a", false},
	} {
		if got := deadHere(c.holder); got != c.dead {
			t.Errorf("deadHere(%q) = %v, want %v", c.holder, got, c.dead)
		}
	}
}
