package query

import (
	"slices"
	"strings"
	"testing"
)

func TestOptionsParse(t *testing.T) {
	o := Options{Run: "r1", Format: "csv"}
	if err := o.Parse("reward > 0.5", "task_id, reward"); err != nil || o.Where == nil || !slices.Equal(o.Select, Columns("task_id, reward")) {
		t.Fatalf("%v %+v", err, o)
	}
	for _, c := range []struct {
		o          Options
		where, err string
	}{
		{Options{Format: "csv"}, "", "query: --run is required"},
		{Options{Run: "r1", Format: "xml"}, "", "query: --format"},
		{Options{Run: "r1", Format: "csv"}, "reward >", ""},
	} {
		err := c.o.Parse(c.where, "")
		if err == nil || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("%+v %q: %v, want %q", c.o, c.where, err, c.err)
		}
	}
}
