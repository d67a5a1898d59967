package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

// StandaloneOptions is the episode `t1 rollout` plays outside any run.
type StandaloneOptions struct {
	// Policy is "config" (the inference section) or "oracle" (the task's
	// reference solution, one top-level shell statement per turn).
	Policy string
	// Solution is the task's solution/solve.sh, for the oracle.
	Solution    string
	Instruction string
	MaxTurns    int
	Seed        uint64
	// Context is the episode's context in tokens; 0 takes the model's.
	Context int
}

// Standalone is an episode's policy with what its turns and rows need.
type Standalone struct {
	Engine inference.Engine
	Chat   agent.Chat
	Config agent.Config
	// Experts is the model's expert count, which the routing codec needs.
	Experts int
}

// StandaloneEpisode sets up the episode o asks for under cfg: the policy,
// its tokenizer's chat and the bounds of a pipeline
// rollout (Episode) but for the context, which is the model's own unless
// o says otherwise. A served model's checkpoint directory gives its
// shape and tokenizer and need not hold weights; the engine must answer
// before the episode starts. An instruction whose first turn does not
// fit the context is refused, saying what would fit.
func StandaloneEpisode(ctx context.Context, cfg config.Config, o StandaloneOptions) (*Standalone, error) {
	var tok tokenizer.Tokenizer
	var pol inference.Engine
	var err error
	modelContext := 0 // the model's own limit; 0 when no model bounds it
	experts := 0
	switch o.Policy {
	case "oracle":
		if tok, err = moe.DefaultTokenizer(); err != nil {
			return nil, err
		}
	case "config":
		opts := InferenceOptions(cfg.Inference)
		var served *servedModel
		if opts.Backend != inference.BackendReference {
			// The configuration check requires the served checkpoint.
			if served, err = loadServed(opts.Checkpoint); err != nil {
				return nil, err
			}
			opts.Model = served.shape
		} else if err := referenceOnly(opts.Checkpoint); err != nil {
			return nil, err
		}
		if err := inference.Probe(ctx, opts); err != nil {
			return nil, err
		}
		if pol, err = inference.Open(ctx, opts, nil); err != nil {
			return nil, err
		}
		if r, ok := pol.(*inference.Reference); ok {
			tok, modelContext, experts = r.Tokenizer(), r.Config().Context, r.Config().Experts
		} else {
			tok, modelContext, experts = served.tok, served.shape.Context, served.shape.Experts
		}
	default:
		return nil, fmt.Errorf("--policy %q: want config or oracle", o.Policy)
	}
	ec := Episode(cfg)
	chat, err := ec.Chat(tok)
	if err != nil {
		return nil, err
	}
	format, err := ec.Format()
	if err != nil {
		return nil, err
	}
	if o.Policy == "oracle" {
		if pol, err = agent.FromSolution(chat, format, o.Solution); err != nil {
			return nil, err
		}
	}
	ec.MaxTurns = o.MaxTurns
	ec.Sampling.Seed = o.Seed
	if ec.Context, err = episodeContext(chat, o.Instruction, ec, o.Policy, o.Context, modelContext); err != nil {
		return nil, err
	}
	return &Standalone{Engine: pol, Chat: chat, Config: ec, Experts: experts}, nil
}

// servedModel is what a rollout needs of a model a remote engine serves.
type servedModel struct {
	shape moe.Config
	tok   tokenizer.Tokenizer
}

// loadServed reads the checkpoint directory of a model a remote engine
// serves: its config.json's dimensions (the routing's layers, top-k and
// experts, the vocabulary, the context) and its tokenizer with the chat
// template beside it, of any architecture, and never its weights, which
// the engine holds (the directory need not have them).
func loadServed(dir string) (*servedModel, error) {
	if !inference.IsLocalCheckpoint(dir) {
		return nil, fmt.Errorf("inference.checkpoint %q: not a local directory holding %s: t1 rollout reads the served model's %s and tokenizer files from its directory", dir, moe.ConfigFile, moe.ConfigFile)
	}
	shape, _, tok, err := moe.LoadServed(dir)
	if err != nil {
		return nil, fmt.Errorf("inference.checkpoint: %w", err)
	}
	return &servedModel{shape: shape, tok: tok}, nil
}

// referenceOnly refuses, before anything starts, a local checkpoint of an
// architecture the in-process reference engine does not run.
func referenceOnly(dir string) error {
	if dir == "" || !inference.IsLocalCheckpoint(dir) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, moe.ConfigFile))
	if err != nil {
		return fmt.Errorf("inference.checkpoint: %w", err)
	}
	_, modelType, err := moe.ParseShape(b)
	if err != nil {
		return fmt.Errorf("inference.checkpoint %s: %w", dir, err)
	}
	if modelType != moe.ModelType {
		return fmt.Errorf("inference.checkpoint %s: model_type %q: the reference engine (inference.backend: reference) runs only %s; serve this model with SGLang or vLLM and set inference.backend: sglang (or vllm) and inference.url", dir, modelType, moe.ModelType)
	}
	return nil
}

// episodeContext is the context an episode runs with: flag when set, else
// the model's own (modelContext, 0 when unknown: the configuration's
// then), and for the oracle, which no model bounds, the configuration's
// plus the first turn when that would take most of it. It fails when the first turn does
// not fit, saying what would.
func episodeContext(chat agent.Chat, instruction string, ec agent.Config, policy string, flag, modelContext int) (int, error) {
	need, err := agent.FirstTurnTokens(chat, instruction, ec)
	if err != nil {
		return 0, err
	}
	switch {
	case flag < 0:
		return 0, fmt.Errorf("--context %d: want a positive number of tokens", flag)
	case flag > 0 && modelContext > 0 && flag > modelContext:
		return 0, fmt.Errorf("--context %d: over the model's context of %d tokens (from its checkpoint)", flag, modelContext)
	case flag > 0:
		ec.Context = flag
	case modelContext > 0:
		ec.Context = modelContext
	case policy == "oracle" && 4*need > 3*ec.Context:
		// No model bounds a replay: the first turn comes on top, so the
		// configured context is left for the turns after it.
		ec.Context += need
	}
	if need <= ec.Context {
		return ec.Context, nil
	}
	if modelContext > 0 && need > modelContext {
		return 0, fmt.Errorf("the task's first turn takes %d tokens (system prompt, instruction and one reply), over the model's context of %d tokens (from its checkpoint): use a model with a longer context", need, modelContext)
	}
	return 0, fmt.Errorf("the task's first turn takes %d tokens (system prompt, instruction and one reply), over the context of %d tokens: pass --context %d or more", need, ec.Context, need)
}
