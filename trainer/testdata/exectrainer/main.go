// Command exectrainer stands in for an external trainer in the exec
// backend's tests: it reads the batch manifest, checks it, and reports a
// result naming a checkpoint, or fails the way a crashing trainer does.
//
//	exectrainer -manifest FILE -out FILE -checkpoint PREFIX [-exit N]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	manifest := flag.String("manifest", "", "batch manifest JSON")
	out := flag.String("out", "", "result file to write")
	ckpt := flag.String("checkpoint", "", "checkpoint to report")
	exit := flag.Int("exit", 0, "exit with this status instead of training")
	flag.Parse()
	if *exit != 0 {
		fmt.Fprintln(os.Stderr, "CUDA out of memory (simulated)")
		os.Exit(*exit)
	}
	b, err := os.ReadFile(*manifest)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var m struct {
		Run    string `json:"run"`
		Chunks int64  `json:"chunks"`
		Tokens int64  `json:"tokens"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Run == "" {
		fmt.Fprintln(os.Stderr, "bad manifest:", err)
		os.Exit(3)
	}
	res := map[string]any{
		"checkpoint": *ckpt,
		"metrics":    map[string]any{"steps": 1, "actions": m.Tokens, "replay": true},
	}
	rb, _ := json.Marshal(res)
	if err := os.WriteFile(*out, rb, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
}
