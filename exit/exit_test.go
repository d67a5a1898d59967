package exit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/t1pipe/t1/engine"
)

// The first code given to an error holds however it is wrapped; errors
// without one map by their cause.
func TestCode(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want int
	}{
		{bg, nil, OK},
		{bg, errors.New("boom"), Failed},
		{bg, Configf("bad %s", "flag"), Config},
		{bg, InfraError(errors.New("no bus")), Infra},
		{bg, With(Failed, InfraError(errors.New("no bus"))), Infra},
		{bg, fmt.Errorf("run: %w", Configf("x")), Config},
		{bg, fmt.Errorf("stage control: %w", engine.ErrLeased), Busy},
		{bg, InfraError(fmt.Errorf("stage control: %w", engine.ErrLeased)), Busy},
		{bg, ErrStopped, Stopped},
		{cancelled, fmt.Errorf("poll: %w", context.Canceled), Stopped},
		{bg, context.Canceled, Failed},
		{bg, errors.New(`unknown command "wrok" for "t1"`), Config},
		{bg, errors.New("accepts 1 arg(s), received 2"), Config},
	} {
		if got := Code(c.ctx, c.err); got != c.want {
			t.Errorf("Code(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if With(Config, nil) != nil || InfraError(nil) != nil {
		t.Error("a nil error was marked")
	}
}

func TestLine(t *testing.T) {
	if got := Line(errors.New("a\n  b\tc\n")); got != "a; b c;" {
		t.Fatalf("%q", got)
	}
}
