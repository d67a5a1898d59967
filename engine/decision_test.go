package engine

import "testing"

// A decision reached while handling different events is one event.
func TestAsDecisionIgnoresTheCause(t *testing.T) {
	t.Parallel()
	a := newEmitter(Event{ID: "cause-a", Run: "r"}, "cfg")
	b := newEmitter(Event{ID: "cause-b", Run: "r"}, "cfg")
	ea, err := a.Emit("pool.sealed", map[string]int{"v": 1}, AsDecision("pool-1"))
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := b.Emit("pool.sealed", map[string]int{"v": 1}, AsDecision("pool-1"))
	if ea.ID != eb.ID {
		t.Fatalf("ids differ: %s %s", ea.ID, eb.ID)
	}
	if ea.CausationID != "cause-a" {
		t.Fatal("a decision still records what caused it")
	}
	ec, _ := a.Emit("pool.sealed", map[string]int{"v": 2}, AsDecision("pool-2"))
	ed, _ := b.Emit("pool.sealed", map[string]int{"v": 1}, WithKey("pool-1"))
	if ec.ID == ea.ID || ed.ID == eb.ID {
		t.Fatal("different decisions, or a keyed event, share an id")
	}
}
