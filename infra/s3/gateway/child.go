package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/t1pipe/t1/infra/s3/embedded"
)

// ServeChild serves the gateway and exits if this process was started by
// embedded.Start, and returns at once otherwise. Call it first in main,
// before anything else reads the environment or the working directory.
func ServeChild() {
	spec, ok := os.LookupEnv(embedded.Env)
	if !ok {
		return
	}
	os.Exit(serveChild(spec))
}

func serveChild(spec string) int {
	hs := os.NewFile(3, "handshake")
	reply := func(h embedded.Handshake) {
		_ = json.NewEncoder(hs).Encode(h)
		hs.Close()
	}
	var o embedded.Options
	if err := json.Unmarshal([]byte(spec), &o); err != nil {
		reply(embedded.Handshake{Error: fmt.Sprintf("%s is not gateway options: %v", embedded.Env, err)})
		return 2
	}
	// The gateway announces its IAM mode with a bare print.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		os.Stdout = null
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	gw, err := Start(ctx, o)
	cancel()
	if err != nil {
		reply(embedded.Handshake{Error: err.Error()})
		return 1
	}
	reply(embedded.Handshake{Config: gw.Config()})
	// Serve until the parent closes the lifeline or exits.
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := gw.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
