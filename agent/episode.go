package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/moe"
)

// Termination reasons of an episode.
const (
	EndComplete  = "task_complete"
	EndMaxTurns  = "max_turns"
	EndTokens    = "token_budget"
	EndWallClock = "wall_clock"
	EndContext   = "context_exhausted"
	EndCancelled = "cancelled"
)

// SystemPrompt tells a capable model the reply format in full.
const SystemPrompt = "You are an agent operating a Linux shell to complete a task. " + ReplyFormat

// BriefSystemPrompt is the reply format in a few tokens, for a small
// model that learns the format from demonstrations rather than from
// reading it.
const BriefSystemPrompt = "Reply with <command>...</command>; when done, <task_complete/>."

// Config bounds an episode. Settings.Config makes one of the configured
// bounds; Run fills the bounds left zero: the Settings from
// DefaultSettings, 300 turns, 100000 sampled tokens, 15 minutes, and
// compaction at 3/4 of the context keeping the last 4 turns.
type Config struct {
	MaxTurns int
	// MaxSampledTokens is the episode's budget of sampled tokens.
	MaxSampledTokens int
	// MaxNewTokens bounds one reply.
	MaxNewTokens int
	WallClock    time.Duration
	// CommandTimeout is a command's default timeout.
	CommandTimeout time.Duration
	// MaxObservation bounds one observation in bytes (head and tail kept).
	MaxObservation int
	// Context is the model's context length in tokens; CompactAt the
	// fraction of it at which the conversation is compacted, keeping the
	// last KeepTurns turns.
	Context   int
	CompactAt float64
	KeepTurns int
	Sampling  inference.SamplingParams
	// SystemPrompt opens the episode (default SystemPrompt).
	SystemPrompt string
	// Model chooses the chat rendering, the action format and the
	// compaction (Config.Chat builds the rendering).
	Model ModelSettings
}

func (c Config) withDefaults() Config {
	d := DefaultSettings()
	if c.MaxTurns <= 0 {
		c.MaxTurns = 300
	}
	if c.MaxSampledTokens <= 0 {
		c.MaxSampledTokens = 100000
	}
	if c.MaxNewTokens <= 0 {
		c.MaxNewTokens = d.MaxNewTokens
	}
	if c.WallClock <= 0 {
		c.WallClock = 15 * time.Minute
	}
	if c.CommandTimeout <= 0 {
		c.CommandTimeout = d.CommandTimeout
	}
	if c.MaxObservation <= 0 {
		c.MaxObservation = d.MaxObservation
	}
	if c.Context <= 0 {
		c.Context = d.Context
	}
	if c.CompactAt <= 0 || c.CompactAt > 1 {
		c.CompactAt = 0.75
	}
	if c.KeepTurns <= 0 {
		c.KeepTurns = 4
	}
	if c.SystemPrompt == "" {
		c.SystemPrompt = SystemPrompt
	}
	m, dm := &c.Model, DefaultModelSettings()
	if m.ActionFormat == "" {
		m.ActionFormat = dm.ActionFormat
	}
	if m.Thinking == "" {
		m.Thinking = dm.Thinking
	}
	if m.Compaction == "" {
		m.Compaction = dm.Compaction
	}
	return c
}

// Format is the action format c.Model names (tags when it names none).
func (c Config) Format() (Format, error) { return NewFormat(c.withDefaults().Model.ActionFormat) }

// SummaryPrompt asks the policy for the summary a policy-written
// compaction carries on with.
const SummaryPrompt = "Your context is nearly full. Do not run any more commands now: write a summary of your work for whoever continues this task with a fresh context (the task's instruction will be shown again). Say what you have done and found, what state the files and the shell are in, and what remains to be done."

// summaryHeading opens the user message that carries the summary on.
const summaryHeading = "Summary of the work so far, written before the context was compacted:\n"

// FirstTurnTokens is the context the first turn of an episode of
// instruction takes: the system prompt and the instruction as the policy
// reads them, and one reply of at most MaxNewTokens. A Context below it
// ends the episode before the policy replies (EndContext).
func FirstTurnTokens(chat Chat, instruction string, cfg Config) (int, error) {
	cfg = cfg.withDefaults()
	asm, err := NewAssembler(chat, []Message{{Role: "system", Content: cfg.SystemPrompt}, {Role: "user", Content: instruction}})
	if err != nil {
		return 0, fmt.Errorf("agent: %w", err)
	}
	return len(asm.Prompt()) + cfg.MaxNewTokens, nil
}

// Shell runs commands with state carried between them.
type Shell interface {
	Run(ctx context.Context, script string, opts sandbox.RunOptions) (sandbox.Result, error)
}

// Turn is one reply and what came of it.
type Turn struct {
	Index       int
	Chunk       int
	Reply       string
	Commands    []string
	ExitCodes   []int
	Observation string
	ParseError  string
	Complete    bool
	Sampled     int
	Duration    time.Duration
	// Summary marks the policy's own summary before a compaction.
	Summary bool
}

// Result is a finished episode.
type Result struct {
	Turns       []Turn
	Chunks      []*Chunk
	Routing     []*moe.Routing // per chunk; nil where the backend returned none
	Termination string
	Repairs     map[string]int
	LossDrift   int
	// Malformed counts the replies that earned a corrective observation.
	Malformed int
	Sampled   int
	// Interrupted counts the commands stopped by their time limit.
	Interrupted int
	// RoutingUnavailable says why the backend returned no routing.
	RoutingUnavailable string
	// Sampling is what the replies were sampled with; the log-probs are
	// relative to its temperature and top-p.
	Sampling inference.SamplingParams
}

// ForSolution is c for replaying a reference solution (Scripted): each
// command may run as long as the task gives the whole solution (its
// [agent] timeout_sec, agentTimeout; zero leaves the episode's wall
// clock), as `t1 tasks check` runs solve.sh, rather than the harness's
// per-command default, which a long loop of a solution outlasts.
func (c Config) ForSolution(agentTimeout time.Duration) Config {
	c = c.withDefaults()
	if agentTimeout > 0 && agentTimeout < c.WallClock {
		c.WallClock = agentTimeout
	}
	c.CommandTimeout = c.WallClock
	return c
}

// CutShort says why a replayed reference solution did not run whole: a
// command stopped by its time limit, or an episode that ended before the
// solution's last turn declared the task complete. Such a replay is not a
// demonstration of the solution, and its verdict is not the solution's.
func (r *Result) CutShort() error {
	switch {
	case r.Interrupted > 0:
		return fmt.Errorf("the reference solution was cut short: %d of its commands were interrupted by their time limit", r.Interrupted)
	case r.Termination != EndComplete:
		return fmt.Errorf("the reference solution was cut short: the episode ended (%s) before the solution's last command", r.Termination)
	}
	return nil
}

// Switcher is a policy engine that may move to newer weights between
// turns, an episode that outlives a policy update going on with the
// newer policy (EpisodeLatest). Run calls Switch before every turn but a
// summary; a move opens a new chunk (ChunkVersion).
type Switcher interface {
	inference.Engine
	Switch(ctx context.Context, turn int) (moved bool, err error)
}

// Run plays one episode: the policy replies, the shell runs its commands,
// the observations come back, until the task is declared complete or a
// bound is reached. Progress, when set, is called after every turn (the
// stage heartbeats from it). An error means the episode could not go on
// (the policy went away, the sandbox broke); the caller retries the attempt.
func Run(ctx context.Context, pol inference.Engine, chat Chat, sh Shell, instruction string, cfg Config, progress func(Turn)) (*Result, error) {
	cfg = cfg.withDefaults()
	format, err := cfg.Format()
	if err != nil {
		return nil, err
	}
	if format.Tools() != nil && chat.Tools() == nil {
		return nil, fmt.Errorf("agent: action format %s calls tools, and the chat template shows none: build the chat with Config.Chat", format.Name())
	}
	start := time.Now()
	opening := []Message{{Role: "system", Content: cfg.SystemPrompt}, {Role: "user", Content: instruction}}
	asm, err := NewAssembler(chat, opening)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	limit := int(float64(cfg.Context) * cfg.CompactAt)
	res := &Result{Sampling: cfg.Sampling}
	var routing []*moe.Routing
	end := ""
	pending, summarising := false, false
	for turn := 0; end == ""; turn++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Compaction drops turns: before the first there is nothing to drop,
		// and a summary would only add to the prompt.
		if n := len(asm.Prompt()) + cfg.MaxNewTokens; len(res.Turns) > 0 && n > limit && (!summarising || n > cfg.Context) {
			summarising = false
			// Keep as many recent turns as fit; a single huge observation
			// may leave room for none.
			fits := false
			for keep := cfg.KeepTurns; keep >= 0 && !fits; keep-- {
				msgs := compact(asm.Messages(), res.Turns, keep)
				ids, err := chat.Render(msgs)
				if err != nil {
					return nil, fmt.Errorf("turn %d: compaction: %w", turn, err)
				}
				fits = len(ids)+cfg.MaxNewTokens <= limit
				if fits || keep == 0 {
					if err := asm.Compact(msgs); err != nil {
						return nil, fmt.Errorf("turn %d: compaction: %w", turn, err)
					}
				}
			}
		}
		if len(asm.Prompt())+cfg.MaxNewTokens > cfg.Context {
			end = EndContext
			break
		}
		if sw, ok := pol.(Switcher); ok && !summarising {
			moved, err := sw.Switch(ctx, turn)
			if err != nil {
				return nil, fmt.Errorf("turn %d: policy: %w", turn, err)
			}
			if moved && len(res.Turns) > 0 {
				if err := asm.Reopen(ChunkVersion); err != nil {
					return nil, fmt.Errorf("turn %d: %w", turn, err)
				}
			}
		}
		t0 := time.Now()
		sp := cfg.Sampling
		sp.MaxNewTokens = min(cfg.MaxNewTokens, cfg.MaxSampledTokens-res.Sampled)
		sp.StopTokenIDs = chat.Stops()
		sp.Seed = cfg.Sampling.Seed + uint64(turn)
		resp, err := pol.Generate(ctx, inference.GenerateRequest{InputIDs: asm.Prompt(), SamplingParams: sp, ReturnLogprob: true, ReturnRoutedExperts: true})
		if err != nil {
			return nil, fmt.Errorf("turn %d: policy: %w", turn, err)
		}
		if len(resp.OutputTokenLogprobs) != len(resp.OutputIDs) {
			return nil, fmt.Errorf("turn %d: policy returned %d log-probs for %d ids", turn, len(resp.OutputTokenLogprobs), len(resp.OutputIDs))
		}
		chunk := len(asm.Chunks()) - 1
		for len(routing) <= chunk {
			routing = append(routing, nil)
		}
		if resp.RoutedExperts == nil && res.RoutingUnavailable == "" {
			res.RoutingUnavailable = resp.RoutingUnavailable
		}
		res.Sampled += len(resp.OutputIDs)
		if summarising {
			// The policy's summary: a turn of its own, closing the chunk
			// it was written in; the episode goes on from the summary.
			summarising = false
			if cfg.Model.SummaryLoss {
				routing[chunk] = resp.RoutedExperts
			}
			text := asm.Summary(resp.OutputIDs, resp.OutputTokenLogprobs, cfg.Model.SummaryLoss)
			tr := Turn{Index: turn, Chunk: chunk, Reply: text, Sampled: len(resp.OutputIDs), Summary: true, Duration: time.Since(t0)}
			res.Turns = append(res.Turns, tr)
			if progress != nil {
				progress(tr)
			}
			if err := asm.Compact(append(opening[:1:1], Message{Role: "user", Content: instruction + "\n\n" + summaryHeading + text})); err != nil {
				return nil, fmt.Errorf("turn %d: compaction: %w", turn, err)
			}
			continue
		}
		routing[chunk] = resp.RoutedExperts
		text := asm.Sampled(resp.OutputIDs, resp.OutputTokenLogprobs)
		tr := Turn{Index: turn, Chunk: chunk, Reply: text, Sampled: len(resp.OutputIDs)}
		reply, perr := format.Parse(text)
		var obs strings.Builder
		if perr != nil {
			tr.ParseError = perr.Error()
			res.Malformed++
			obs.WriteString(format.Corrective(perr))
		}
		for _, c := range reply.Commands {
			if time.Since(start) > cfg.WallClock {
				break
			}
			tr.Commands = append(tr.Commands, c.Script)
			timeout := c.Timeout
			if timeout == 0 {
				timeout = cfg.CommandTimeout
			}
			r, err := sh.Run(ctx, c.Script, sandbox.RunOptions{Timeout: timeout, MaxOutput: cfg.MaxObservation})
			if err != nil {
				return nil, fmt.Errorf("turn %d: shell: %w", turn, err)
			}
			tr.ExitCodes = append(tr.ExitCodes, r.ExitCode)
			if r.TimedOut {
				res.Interrupted++
			}
			observe(&obs, c.Script, r, timeout)
		}
		tr.Complete = reply.Complete && perr == nil
		tr.Observation = bound(obs.String(), cfg.MaxObservation)
		if format.Confirm() {
			// Completion counts when the reply after the question declares
			// it again; any other reply withdraws it.
			if tr.Complete && !pending {
				tr.Complete, pending = false, true
				tr.Observation = format.ConfirmPrompt(tr.Observation)
			} else if !tr.Complete {
				pending = false
			}
		}
		tr.Duration = time.Since(t0)
		res.Turns = append(res.Turns, tr)
		if progress != nil {
			progress(tr)
		}
		switch {
		case tr.Complete:
			end = EndComplete
		case turn+1 >= cfg.MaxTurns:
			end = EndMaxTurns
		case res.Sampled >= cfg.MaxSampledTokens:
			end = EndTokens
		case time.Since(start) > cfg.WallClock:
			end = EndWallClock
		default:
			next := Message{Role: chat.ObservationRole(), Content: tr.Observation}
			if cfg.Model.Compaction == CompactPolicy {
				// Ask for the summary while there is still room to write it.
				ids, err := chat.Render(append(slices.Clone(asm.Messages()), next))
				if err != nil {
					return nil, fmt.Errorf("turn %d: %w", turn, err)
				}
				if len(ids)+cfg.MaxNewTokens > limit {
					next.Content += "\n\n" + SummaryPrompt
					summarising = true
				}
			}
			if _, err := asm.Next(next); err != nil {
				return nil, fmt.Errorf("turn %d: %w", turn, err)
			}
		}
	}
	res.Termination = end
	asm.Close()
	res.Chunks = asm.Chunks()
	for len(routing) < len(res.Chunks) {
		routing = append(routing, nil)
	}
	res.Routing = routing
	res.Repairs = asm.Counts
	res.LossDrift = asm.LossDrift
	return res, nil
}

func observe(b *strings.Builder, script string, r sandbox.Result, timeout time.Duration) {
	first, _, multi := strings.Cut(script, "\n")
	if multi {
		first += " …"
	}
	fmt.Fprintf(b, "$ %s\n", first)
	b.WriteString(r.Stdout)
	if r.Stderr != "" {
		if r.Stdout != "" && !strings.HasSuffix(r.Stdout, "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(r.Stderr)
	}
	if out := r.Stdout + r.Stderr; out != "" && !strings.HasSuffix(out, "\n") {
		b.WriteByte('\n')
	}
	switch {
	case r.TimedOut:
		fmt.Fprintf(b, "[timed out after %s; the command was interrupted]\n", timeout)
	case r.ExitCode != 0:
		fmt.Fprintf(b, "[exit status %d]\n", r.ExitCode)
	}
	if r.Restarted {
		b.WriteString("[the shell was restarted: its directory, variables and jobs are gone; files remain]\n")
	}
}

// bound keeps the head and the tail of s within n bytes.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := fmt.Sprintf("\n[… %d bytes omitted …]\n", len(s)-n)
	h := (n - len(note)) / 2
	if h < 0 {
		return s[:n]
	}
	return s[:h] + note + s[len(s)-(n-len(note)-h):]
}

// compact keeps the system prompt and instruction, a summary of the
// earlier turns, and the last keep turns verbatim.
func compact(msgs []Message, turns []Turn, keep int) []Message {
	head := msgs[:2]
	// The tail is the last keep assistant/user pairs.
	tail := msgs[2:]
	if n := 2 * keep; len(tail) > n {
		tail = tail[len(tail)-n:]
	}
	if keep == 0 {
		tail = nil
	}
	var sum strings.Builder
	dropped := len(turns) - keep
	fmt.Fprintf(&sum, "[Context compacted: %d earlier turns summarised.]\nCommands run so far:\n", max(dropped, 0))
	for _, t := range turns[:max(dropped, 0)] {
		for i, c := range t.Commands {
			line, _, _ := strings.Cut(c, "\n")
			status := ""
			if i < len(t.ExitCodes) && t.ExitCodes[i] != 0 {
				status = fmt.Sprintf(" (exit %d)", t.ExitCodes[i])
			}
			fmt.Fprintf(&sum, "- %s%s\n", bound(line, 120), status)
		}
	}
	out := append([]Message{}, head...)
	out = append(out, Message{Role: "user", Content: bound(sum.String(), 1500)})
	return append(out, tail...)
}
