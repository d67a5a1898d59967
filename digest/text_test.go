package digest

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteText(t *testing.T) {
	d := &Digest{Run: "r1", Tables: []Table{{Name: "rewards", Rows: 3, Files: 1, SHA256: "ab"}}, SHA256: "ff"}
	var b bytes.Buffer
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"run            r1\n", "table rewards  3 rows", "duplicates     trajectories 0, rewards 0", "digest         ff\n"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("lacks %q:\n%s", want, b.String())
		}
	}
	if !strings.Contains(Help(), WallClock()[0]) {
		t.Fatal("help names no wall-clock column")
	}
}
