package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
)

// instantShell answers every command at once with a short output: the
// benchmark measures the harness (template, TITO, parsing, observation
// building), not commands.
type instantShell struct{}

func (instantShell) Run(_ context.Context, script string, _ sandbox.RunOptions) (sandbox.Result, error) {
	return sandbox.Result{Stdout: "ok: " + script + "\n"}, nil
}

// BenchmarkHarnessTurn is the harness's own cost per turn, without model
// or command time: a scripted policy, a shell that answers at once.
func BenchmarkHarnessTurn(b *testing.B) {
	tp := template(&testing.T{})
	replies := make([]string, 64)
	for i := range replies {
		replies[i] = fmt.Sprintf("Next step %d.\n<command>ls -la /app/dir%d && cat /app/file%d.txt</command>", i, i, i)
	}
	b.ResetTimer()
	turns := 0
	for range b.N {
		res, err := Run(context.Background(), NewScripted(OwnChat(tp), replies), OwnChat(tp), instantShell{}, "Benchmark task.", Config{MaxTurns: len(replies) + 1, Context: 1 << 20}, nil)
		if err != nil {
			b.Fatal(err)
		}
		turns += len(res.Turns)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns), "µs/turn")
}

// BenchmarkHarnessTurnQwen3 is BenchmarkHarnessTurn on Qwen3's own
// template and tokenizer with native tool calls: every boundary re-renders
// the whole conversation through Jinja and tokenises it, so a turn costs
// more as the episode grows.
func BenchmarkHarnessTurnQwen3(b *testing.B) {
	tp := qwen3(&testing.T{}, "template")
	replies := make([]string, 64)
	for i := range replies {
		replies[i] = fmt.Sprintf("<think>\nNext step %d.\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls -la /app/dir%d && cat /app/file%d.txt\"}}\n</tool_call>", i, i, i)
	}
	cfg := Config{MaxTurns: len(replies) + 1, Context: 1 << 20, SystemPrompt: ToolCallsSystemPrompt, Model: ModelSettings{ActionFormat: FormatToolCalls}}
	b.ResetTimer()
	turns := 0
	for range b.N {
		res, err := Run(context.Background(), NewScripted(tp, replies), tp, instantShell{}, "Benchmark task.", cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if res.Repairs["strict_prefix"] != len(replies) {
			b.Fatalf("repairs %v", res.Repairs)
		}
		turns += len(res.Turns)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(turns), "µs/turn")
}

// BenchmarkEpisodeTrivial plays whole episodes of a trivial policy (five
// echo commands, then done) in a fresh bubblewrap sandbox each.
func BenchmarkEpisodeTrivial(b *testing.B) {
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		b.Skip(err)
	}
	tp := template(&testing.T{})
	replies := []string{"<command>echo 1</command>", "<command>echo 2</command>", "<command>echo 3</command>",
		"<command>echo 4</command>", "<command>echo 5</command>", "<task_complete/>"}
	ctx := context.Background()
	for range b.N {
		sb, err := bw.Start(ctx, sandbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Run(ctx, NewScripted(OwnChat(tp), replies), OwnChat(tp), sh, "Echo five numbers.", Config{}, nil); err != nil {
			b.Fatal(err)
		}
		sh.Close()
		sb.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Minutes(), "episodes/min")
}
