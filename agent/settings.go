package agent

import (
	"os"
	"path/filepath"
	"time"

	"github.com/t1pipe/t1/check"
	"github.com/t1pipe/t1/infra/inference"
)

// Settings are the episode bounds a pipeline configures
// (stages.rollout in pipeline.yaml). Config holds them with the bounds
// each attempt sets for itself: turns, wall clock, sampling seed.
type Settings struct {
	// MaxNewTokens bounds one reply.
	MaxNewTokens int `yaml:"max_new_tokens"`
	// Context is the tokens the harness keeps the conversation within,
	// compacting it first; at most the model's context.
	Context int `yaml:"context"`
	// CommandTimeout is a command's default timeout.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// MaxObservation bounds one observation in bytes (head and tail kept).
	MaxObservation int `yaml:"max_observation"`
	// Temperature and TopP sample every reply.
	Temperature float64 `yaml:"temperature"`
	TopP        float64 `yaml:"top_p"`
	// TrainTemperature, when set, samples the replies of training
	// attempts in its place, while evaluations keep Temperature. A
	// fine-tuned policy is often so sure of itself that the attempts of
	// one group all earn the same reward, which gives PPO no advantage to
	// learn from; sampling hotter makes them differ. The tokens rows keep
	// the temperature each reply was sampled at, and the trainer takes
	// log-probs at it, so the ratio stays that of the sampled policy.
	TrainTemperature float64 `yaml:"train_temperature" json:",omitzero"`
	// EpisodeVersion is the policy a training attempt in progress samples
	// once a newer one is stored: EpisodeStart (the default) finishes on
	// the version it started with; EpisodeLatest moves to the newest
	// between turns, in a chunk of its own, and records the version of
	// every turn (training.max_staleness).
	EpisodeVersion EpisodeVersion `yaml:"episode_version" json:",omitzero"`
	// SystemPrompt opens every episode: BriefSystemPrompt (the default,
	// sized for the reference model: every token of it is trained on
	// again in every chunk) or SystemPrompt, or a prompt of one's own.
	SystemPrompt string `yaml:"system_prompt"`
	// Model is how the policy's model reads and writes a conversation. At
	// its defaults it is left out of the configuration hash, so a run that
	// does not set it keeps its event ids.
	Model ModelSettings `yaml:"model" json:",omitzero"`
}

// EpisodeVersion is stages.rollout.episode_version.
type EpisodeVersion string

// The episode versions.
const (
	EpisodeStart  EpisodeVersion = "start"
	EpisodeLatest EpisodeVersion = "latest"
)

// IsZero reports the default, which the configuration hash leaves out.
func (v EpisodeVersion) IsZero() bool { return v == "" || v == EpisodeStart }

// ModelSettings choose, per model, the chat rendering, the reply format
// and the compaction (stages.rollout.model).
type ModelSettings struct {
	// Tokenizer is a model directory holding tokenizer.json and
	// tokenizer_config.json: the episode renders with the model's own
	// chat_template and tokenises with its tokenizer, which must be the
	// policy checkpoint's own files (moe.TokenizerMismatch; the directory
	// may add the template a checkpoint lacks). Empty (the default):
	// the policy checkpoint's tokenizer, with the chat template a Hugging
	// Face checkpoint carries, else t1's own template.
	Tokenizer string `yaml:"tokenizer"`
	// ActionFormat is how replies ask for commands: tags (the default),
	// terminus-json or tool-calls (which needs the model's template: from
	// Tokenizer, or carried by a Hugging Face checkpoint).
	ActionFormat string `yaml:"action_format"`
	// Thinking is the template's enable_thinking: template (not passed,
	// the template's own default), on or off.
	Thinking string `yaml:"thinking"`
	// Compaction is mechanical (the default: a summary of the commands
	// run, written by the harness) or policy (the policy writes the
	// summary in a turn of its own, as Terminus-2 does).
	Compaction string `yaml:"compaction"`
	// SummaryLoss trains on the policy's summary tokens (compaction:
	// policy); off, they are context the policy wrote but is not scored on.
	SummaryLoss bool `yaml:"summary_loss"`
}

// DefaultModelSettings are t1's own tokenizer, template and tags.
func DefaultModelSettings() ModelSettings {
	return ModelSettings{ActionFormat: FormatTags, Thinking: "template", Compaction: CompactMechanical}
}

// Compaction kinds.
const (
	CompactMechanical = "mechanical"
	CompactPolicy     = "policy"
)

// IsZero reports the defaults, which the configuration hash leaves out.
func (m ModelSettings) IsZero() bool { return m == DefaultModelSettings() || m == ModelSettings{} }

// Check reports every invalid setting. Whether the policy has a template
// to show tools or think with depends on its checkpoint (a Hugging Face
// model's carries one), so Config.Chat refuses that, at the episode's
// start.
func (m ModelSettings) Check(r check.Report) {
	if m.Tokenizer != "" {
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
			if _, err := os.Stat(filepath.Join(m.Tokenizer, f)); err != nil {
				r("tokenizer", "%s: want a model directory holding tokenizer.json and tokenizer_config.json", err)
				break
			}
		}
	}
	if _, err := NewFormat(m.ActionFormat); err != nil {
		r("action_format", "%q: want one of %v", m.ActionFormat, Formats)
	}
	if m.Thinking != "template" && m.Thinking != "on" && m.Thinking != "off" {
		r("thinking", "%q: want template, on or off", m.Thinking)
	}
	if m.Compaction != CompactMechanical && m.Compaction != CompactPolicy {
		r("compaction", "%q: want mechanical or policy", m.Compaction)
	}
	if m.SummaryLoss && m.Compaction != CompactPolicy {
		r("summary_loss", "only a policy-written summary has tokens to train on: set compaction: policy")
	}
}

// DefaultSettings are the built-in episode bounds, small enough for the
// reference model on a laptop.
func DefaultSettings() Settings {
	return Settings{MaxNewTokens: 40, Context: 1024, CommandTimeout: 30 * time.Second, MaxObservation: 1024, Temperature: 1, TopP: 1,
		SystemPrompt: BriefSystemPrompt, EpisodeVersion: EpisodeStart, Model: DefaultModelSettings()}
}

// Check reports every invalid setting. Whether the policy has a template
// to show tools or think with depends on its checkpoint (a Hugging Face
// model's carries one), so Config.Chat refuses that, at the episode's
// start.
func (s Settings) Check(r check.Report) {
	r.AtLeast("max_new_tokens", s.MaxNewTokens, 1)
	r.AtLeast("context", s.Context, 64)
	r.AtLeast("max_observation", s.MaxObservation, 64)
	r.Positive("command_timeout", s.CommandTimeout)
	if s.SystemPrompt == "" {
		r("system_prompt", "must not be empty")
	}
	s.Model.Check(r.Under("model"))
	if !s.EpisodeVersion.IsZero() && s.EpisodeVersion != EpisodeLatest {
		r("episode_version", "%q: want start or latest", s.EpisodeVersion)
	}
	if s.TrainTemperature < 0 {
		r("train_temperature", "must not be negative (0 samples training attempts at temperature), got %v", s.TrainTemperature)
	}
	if s.Temperature < 0 || s.TopP <= 0 || s.TopP > 1 {
		r("", "temperature %v and top_p %v: want temperature ≥ 0 and top_p in (0, 1]", s.Temperature, s.TopP)
	}
}

// Config is the episode configuration of s; the bounds it leaves zero
// take Run's defaults.
func (s Settings) Config() Config {
	return Config{MaxNewTokens: s.MaxNewTokens, Context: s.Context, CommandTimeout: s.CommandTimeout, MaxObservation: s.MaxObservation, SystemPrompt: s.SystemPrompt,
		Sampling: inference.SamplingParams{Temperature: s.Temperature, TopP: s.TopP}, Model: s.Model}
}
