package execute

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/ui"
)

// UI serves t1 ui over in's log and store on addr until ctx ends, calling
// ready with the URL once it listens. A run named that the log does not
// hold is a usage error naming those it does; so is an address that is
// not host:port. Token text is the tokenizer's the rollouts used: the
// configured model's, else the local checkpoint's, else t1's own.
func UI(ctx context.Context, in *local.Infra, run, addr string, ready func(url string)) error {
	if run != "" {
		if err := known.Run(ctx, in.Log, in.Store, run); err != nil {
			return err
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return exit.Configf("ui: --addr %q: %v", addr, err)
	}
	dir := in.Config.Stages.Rollout.Model.Tokenizer
	if ck := in.Config.Inference.Checkpoint; dir == "" && ck != "" {
		if _, err := os.Stat(filepath.Join(ck, "tokenizer.json")); err == nil {
			dir = ck
		}
	}
	tok, err := moe.TokenizerAt(dir)
	if err != nil {
		return exit.With(exit.Config, fmt.Errorf("ui: tokenizer: %w", err))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return exit.With(exit.Config, fmt.Errorf("ui: %w", err))
	}
	ready("http://" + ln.Addr().String() + "/")
	s := &ui.Server{Log: in.Log, Store: in.Store, Tokenizer: tok, Run: run, Rescorer: &Rescorer{Log: in.Log, Store: in.Store}}
	return s.Serve(ctx, ln)
}
