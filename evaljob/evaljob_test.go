package evaljob

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/stages/eval"
)

// A job that cannot start says why with the exit code of the cause: the
// command line or the configuration (2), or the servers (3); its summary
// carries the code and the reason.
func TestJobThatCannotStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	unreachable := cfg
	unreachable.Bus.Mode = config.External
	unreachable.Bus.External.URLs = []string{"nats://" + dead}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  config.Config
		o    Options
		want int
	}{
		{"no suite", cfg, Options{Run: "r", Policy: "v0"}, exit.Config},
		{"a bad run", cfg, Options{Run: "R_1", Policy: "v0", Suite: "builtin"}, exit.Config},
		{"a bad version", cfg, Options{Run: "r", Policy: "latest", Suite: "builtin"}, exit.Config},
		{"an unknown suite", cfg, Options{Run: "r", Policy: "v0", Suite: "nope"}, exit.Config},
		{"too many attempts", cfg, Options{Run: "r", Policy: "v0", Suite: "builtin", Attempts: 101}, exit.Config},
		{"bus unreachable", unreachable, Options{Run: "r", Policy: "v0", Suite: "builtin"}, exit.Infra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := Run(ctx, io.Discard, func() (config.Config, error) { return tc.cfg, nil }, tc.o)
			if got := exit.Code(ctx, err); got != tc.want || sum.ExitCode != tc.want || sum.Status != "failed" || sum.Reason == "" {
				t.Fatalf("exit %d (%v), summary %+v, want %d", got, err, sum, tc.want)
			}
		})
	}
}

// A directory suite is named for its base name and what its tasks hash
// to, so the same tasks are the same suite wherever they lie; the
// configured suite keeps its name.
func TestResolveSuite(t *testing.T) {
	es := eval.Settings{Suite: "builtin"}
	if name, extra, err := resolveSuite(es, "builtin"); err != nil || name != "builtin" || extra != nil {
		t.Fatalf("configured suite: %s %v %v", name, extra, err)
	}
	name, extra, err := resolveSuite(es, "../harbor/testdata/tasks")
	if err != nil || !strings.HasPrefix(name, "tasks-") || len(name) != len("tasks-")+8 || extra == nil || len(extra.Dirs) != 1 {
		t.Fatalf("directory suite: %s %+v %v", name, extra, err)
	}
	if again, _, _ := resolveSuite(eval.Settings{}, "../harbor/testdata/tasks/"); again != name {
		t.Fatalf("the same tasks named %s and %s", name, again)
	}
	for _, arg := range []string{"nope", "../harbor/testdata/tasks/word-freq/instruction.md", t.TempDir()} {
		if _, _, err := resolveSuite(es, arg); exit.Code(context.Background(), err) != exit.Config {
			t.Errorf("%s: %v", arg, err)
		}
	}
}
