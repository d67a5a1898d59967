package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/t1pipe/t1/moe"
)

// Inference selects the engine rollouts sample from (infra/inference).
type Inference struct {
	// Backend is reference (the in-process MoE), sglang or vllm.
	Backend string `yaml:"backend"`
	// URL is the base URL of the SGLang or vLLM server.
	URL string `yaml:"url"`
	// URLs, in place of URL, are several servers of the same model: t1
	// spreads episodes over them, has each load a policy version before it
	// serves it, and sends a request an engine fails to answer to another
	// (inference.Pool).
	URLs []string `yaml:"urls"`
	// ServedModel is the model name vLLM's completions API wants.
	ServedModel string `yaml:"served_model"`
	// Timeout bounds one generate request.
	Timeout time.Duration `yaml:"timeout"`
	// LoadTimeout (sglang, vllm) bounds one weight load, which waits for
	// the generations in flight and reads a whole checkpoint.
	LoadTimeout time.Duration `yaml:"load_timeout"`
	// VLLMLogprobsMode (vllm) is the server's --logprobs-mode: vLLM's
	// default raw_logprobs reports log-probs before temperature and top-p,
	// so sampling at another temperature or top_p needs the server started
	// with --logprobs-mode processed_logprobs and this set to match.
	VLLMLogprobsMode string `yaml:"vllm_logprobs_mode"`
	// Checkpoint is the initial policy (version 0): a local directory or
	// an object-store key prefix in the Hugging Face layout; its
	// config.json gives the model's dimensions and its tokenizer file the
	// tokenizer, so Model is then not consulted. Empty starts from a
	// freshly initialised model of Model's shape with the default
	// tokenizer.
	Checkpoint string `yaml:"checkpoint"`
	// WeightsDir (sglang, vllm; required) is a directory t1 writes and
	// the engines read, such as a shared filesystem: each policy version
	// is exported there (<run>/v<version>) and the engines told to load
	// it.
	WeightsDir string `yaml:"weights_dir"`
	// Precision is the reference backend's serving precision: bf16 or f32.
	Precision string `yaml:"precision"`
	// Model is the shape of a fresh reference model (no Checkpoint); for
	// sglang and vllm its layers and top_k reshape the returned routing.
	Model    InferenceModel `yaml:"model"`
	Sampling Sampling       `yaml:"sampling"`
}

// Endpoints are the engine servers' URLs: urls, else url.
func (in Inference) Endpoints() []string {
	if len(in.URLs) > 0 {
		return in.URLs
	}
	if in.URL != "" {
		return []string{in.URL}
	}
	return nil
}

// InferenceModel is the shape of a fresh Qwen3-MoE (moe.Config).
type InferenceModel struct {
	Vocab         int     `yaml:"vocab"`
	Layers        int     `yaml:"layers"`
	DModel        int     `yaml:"d_model"`
	Heads         int     `yaml:"heads"`
	KVHeads       int     `yaml:"kv_heads"`
	HeadDim       int     `yaml:"head_dim"`
	Experts       int     `yaml:"experts"`
	TopK          int     `yaml:"top_k"`
	DFF           int     `yaml:"d_ff"`
	Context       int     `yaml:"context"`
	Seed          uint64  `yaml:"seed"`
	RopeTheta     float64 `yaml:"rope_theta"`
	RMSNormEps    float64 `yaml:"rms_norm_eps"`
	NormTopKProb  bool    `yaml:"norm_topk_prob"`
	TieEmbeddings bool    `yaml:"tie_embeddings"`
}

// Shape is the model's moe.Config.
func (m InferenceModel) Shape() moe.Config {
	return moe.Config{Vocab: m.Vocab, Layers: m.Layers, DModel: m.DModel, Heads: m.Heads, KVHeads: m.KVHeads, HeadDim: m.HeadDim,
		Experts: m.Experts, TopK: m.TopK, DFF: m.DFF, Context: m.Context, Seed: m.Seed, RopeTheta: m.RopeTheta, RMSNormEps: m.RMSNormEps,
		NormTopKProb: m.NormTopKProb, TieEmbeddings: m.TieEmbeddings}
}

// ModelOf is the configuration of shape c.
func ModelOf(c moe.Config) InferenceModel {
	return InferenceModel{Vocab: c.Vocab, Layers: c.Layers, DModel: c.DModel, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Experts: c.Experts, TopK: c.TopK, DFF: c.DFF, Context: c.Context, Seed: c.Seed, RopeTheta: c.RopeTheta, RMSNormEps: c.RMSNormEps,
		NormTopKProb: c.NormTopKProb, TieEmbeddings: c.TieEmbeddings}
}

// Sampling holds the default sampling parameters of rollouts.
type Sampling struct {
	Temperature  float64 `yaml:"temperature"`
	TopP         float64 `yaml:"top_p"`
	MaxNewTokens int     `yaml:"max_new_tokens"`
}

func defaultInference() Inference {
	return Inference{
		Backend:     "reference",
		URLs:        []string{},
		Timeout:     2 * time.Minute,
		LoadTimeout: 30 * time.Minute,
		Precision:   "bf16",
		Model:       ModelOf(moe.DefaultConfig()),
		Sampling:    Sampling{Temperature: 1, TopP: 1, MaxNewTokens: 256},
	}
}

func (in Inference) check(bad func(path, format string, args ...any)) {
	const p = "inference"
	switch in.Backend {
	case "reference":
		if in.WeightsDir != "" {
			bad(p+".weights_dir", "is for the sglang and vllm backends (the reference engine loads new weights in process)")
		}
	case "sglang", "vllm":
		if len(in.Endpoints()) == 0 {
			bad(p+".url", "required when inference.backend is %s (or urls, for several engines)", in.Backend)
		}
		// SGLang never says how its routed experts are shaped, and an
		// engine's weights are the checkpoint it was started from: the
		// run's version 0, whose config.json gives the layers and top_k.
		if in.Checkpoint == "" {
			bad(p+".checkpoint", "required when inference.backend is %s: the checkpoint directory the engine serves (its config.json gives "+
				"the layers and top_k its routed experts are reshaped with; the weights need not be readable by t1)", in.Backend)
		}
		if in.WeightsDir == "" {
			bad(p+".weights_dir", "required when inference.backend is %s: a directory t1 writes and the engine reads (a shared filesystem), "+
				"where each policy version is exported for the engine to load", in.Backend)
		}
	default:
		bad(p+".backend", "unknown backend %q (want reference, sglang or vllm)", in.Backend)
	}
	if in.URL != "" && len(in.URLs) > 0 {
		bad(p+".urls", "give url or urls, not both")
	}
	seen := map[string]bool{}
	for i, u := range in.Endpoints() {
		key := p + ".url"
		if len(in.URLs) > 0 {
			key = fmt.Sprintf("%s.urls[%d]", p, i)
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			bad(key, "want an http:// or https:// URL, got %q", u)
		}
		if seen[strings.TrimRight(u, "/")] {
			bad(key, "%s is listed twice", u)
		}
		seen[strings.TrimRight(u, "/")] = true
	}
	if in.Timeout <= 0 {
		bad(p+".timeout", "must be positive, got %s", in.Timeout)
	}
	if in.LoadTimeout <= 0 {
		bad(p+".load_timeout", "must be positive, got %s", in.LoadTimeout)
	}
	switch in.VLLMLogprobsMode {
	case "", "raw_logprobs", "processed_logprobs":
		if in.VLLMLogprobsMode != "" && in.Backend != "vllm" {
			bad(p+".vllm_logprobs_mode", "is for the vllm backend")
		}
	default:
		bad(p+".vllm_logprobs_mode", "unknown mode %q (want raw_logprobs or processed_logprobs, the server's --logprobs-mode)", in.VLLMLogprobsMode)
	}
	if t := in.Sampling.Temperature; in.Backend == "vllm" && in.VLLMLogprobsMode != "processed_logprobs" && (t != 0 && t != 1 || in.Sampling.TopP < 1) {
		key := p + ".sampling.temperature"
		if t == 0 || t == 1 {
			key = p + ".sampling.top_p"
		}
		bad(key, "vLLM's default --logprobs-mode raw_logprobs reports log-probs before temperature and top-p; sampling at temperature %g, top_p %g "+
			"needs the server started with --logprobs-mode processed_logprobs and inference.vllm_logprobs_mode: processed_logprobs", t, in.Sampling.TopP)
	}
	if in.Precision != "bf16" && in.Precision != "f32" {
		bad(p+".precision", "unknown precision %q (want bf16 or f32)", in.Precision)
	}
	m := in.Model
	for _, f := range []struct {
		key string
		v   int
	}{{"vocab", m.Vocab}, {"layers", m.Layers}, {"d_model", m.DModel}, {"heads", m.Heads}, {"kv_heads", m.KVHeads}, {"head_dim", m.HeadDim},
		{"experts", m.Experts}, {"top_k", m.TopK}, {"d_ff", m.DFF}, {"context", m.Context}} {
		if f.v < 1 {
			bad(p+".model."+f.key, "must be at least 1, got %d", f.v)
		}
	}
	if m.KVHeads > 0 && m.Heads%m.KVHeads != 0 {
		bad(p+".model.kv_heads", "%d must divide heads (%d)", m.KVHeads, m.Heads)
	}
	if m.HeadDim%2 != 0 {
		bad(p+".model.head_dim", "must be even (RoPE rotates its halves), got %d", m.HeadDim)
	}
	if !(m.RopeTheta > 0) {
		bad(p+".model.rope_theta", "must be positive, got %g", m.RopeTheta)
	}
	if !(m.RMSNormEps > 0 && m.RMSNormEps < 1) {
		bad(p+".model.rms_norm_eps", "must be in (0, 1), got %g", m.RMSNormEps)
	}
	if m.TopK > m.Experts {
		bad(p+".model.top_k", "%d exceeds experts (%d)", m.TopK, m.Experts)
	}
	s := in.Sampling
	if s.Temperature < 0 {
		bad(p+".sampling.temperature", "must not be negative (0 is greedy), got %g", s.Temperature)
	}
	if s.TopP <= 0 || s.TopP > 1 {
		bad(p+".sampling.top_p", "want (0, 1], got %g", s.TopP)
	}
	if s.MaxNewTokens < 1 {
		bad(p+".sampling.max_new_tokens", "must be at least 1, got %d", s.MaxNewTokens)
	}
}
