package known

import (
	"context"
	"strings"
	"testing"

	"github.com/t1pipe/t1/exit"
)

func TestClosestFirst(t *testing.T) {
	have := []string{"rewards", "main", "main-fixed", "eval", "m"}
	if got := Closest("MAIN", have); got[0] != "main" || got[1] != "m" {
		t.Fatalf("closest to MAIN: %v", got)
	}
	if got := Closest("eval.complete", []string{"eval.requested", "eval.completed", "run.completed"}); got[0] != "eval.completed" {
		t.Fatalf("closest to eval.complete: %v", got)
	}
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"qurey", "query", 2}, {"kitten", "sitting", 3}, {"é", "e", 1}, {"", "abc", 3}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

func TestUnknownIsUsageErrorNamingWhatExists(t *testing.T) {
	err := Name("table", "tables", "reward", []string{"tasks", "rewards", "turns"})
	if exit.Code(context.Background(), err) != exit.Config {
		t.Fatalf("exit %d", exit.Code(context.Background(), err))
	}
	if want := `unknown table "reward" (tables: rewards, tasks, turns)`; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
	if Name("table", "tables", "turns", []string{"turns"}) != nil {
		t.Fatal("a known name refused")
	}
	if err := Unknown("run", "runs", "x", nil); err.Error() != `unknown run "x": there are no runs` {
		t.Fatalf("%q", err)
	}
	var many []string
	for r := 'a'; r <= 'z'; r++ {
		many = append(many, string(r)+"run")
	}
	if err := Unknown("run", "runs", "qrun", many).Error(); !strings.HasPrefix(err, `unknown run "qrun" (runs: qrun, arun`) ||
		!strings.HasSuffix(err, " and 14 more)") {
		t.Fatalf("%q", err)
	}
}
