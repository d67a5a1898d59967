package config

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// Variant is an ablation of a run: the base configuration with a few keys
// changed, run as its own run <run.id>-<name> beside the base run so the
// report can compare them on one seed.
type Variant struct {
	Name string `yaml:"name"`
	// Set maps dotted key paths of this file (training.replay,
	// stages.reward.mode, …) to the values the variant uses instead.
	Set map[string]any `yaml:"set"`
}

// fixedKeys are the settings a variant may not change: they say where a
// run lives and what it is called, not how it trains.
var fixedKeys = []string{"run.id", "data", "bus", "store", "variants"}

var variantName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

func defaultVariants() []Variant {
	return []Variant{
		{Name: "replay-off", Set: map[string]any{"training.replay": false}},
		{Name: "critic-cold", Set: map[string]any{"training.warmup.steps": uint64(0), "training.critic_init": CriticFresh}},
		{Name: "reward-fraction", Set: map[string]any{"stages.reward.mode": "fraction"}},
		{Name: "reward-binary", Set: map[string]any{"stages.reward.mode": "binary"}},
	}
}

// VariantNames lists the configured variants in file order.
func (c Config) VariantNames() []string {
	names := make([]string, len(c.Variants))
	for i, v := range c.Variants {
		names[i] = v.Name
	}
	return names
}

// Variant returns the configuration of the variant called name: the
// receiver with the variant's keys set, run id <run.id>-<name>, validated.
// A key that does not exist, a value of the wrong type or an invalid
// result is an error naming the variant and the key.
func (c Config) Variant(name string) (Config, error) {
	i := slices.IndexFunc(c.Variants, func(v Variant) bool { return v.Name == name })
	if i < 0 {
		return Config{}, fmt.Errorf("variants: no variant %q (configured: %s)", name, strings.Join(c.VariantNames(), ", "))
	}
	out, err := c.overlaid(c.Variants[i].Set)
	if err != nil {
		return Config{}, fmt.Errorf("variants.%s: %w", name, err)
	}
	out.Run.ID = c.Run.ID + "-" + name
	if err := out.Validate(); err != nil {
		return Config{}, fmt.Errorf("variants.%s: %w", name, err)
	}
	out.Variants = c.Variants
	return out, nil
}

// overlaid is c with the dotted keys of set changed, as one run's
// configuration: no variants and no setups, unvalidated. The overlay
// decodes into a copy whose slices and maps are its own, so c never sees
// the new values.
func (c Config) overlaid(set map[string]any) (Config, error) {
	doc, err := overlay(set)
	if err != nil {
		return Config{}, err
	}
	out := c
	out.Setups = nil
	out.Variants = nil
	out.Bus.External.URLs = slices.Clone(c.Bus.External.URLs)
	out.Engine.Backoff = slices.Clone(c.Engine.Backoff)
	out.Stages.Eval.Dirs = slices.Clone(c.Stages.Eval.Dirs)
	out.Training.Trainer.Command = slices.Clone(c.Training.Trainer.Command)
	if err := decodeOverlay(doc, &out); err != nil {
		return Config{}, err
	}
	return out, nil
}

// overlay turns dotted keys into the nested YAML document they stand for.
func overlay(set map[string]any) ([]byte, error) {
	root := map[string]any{}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts := strings.Split(k, ".")
		if slices.Contains(parts, "") {
			return nil, fmt.Errorf("key %q: want a dotted path such as training.replay", k)
		}
		node := root
		for i, p := range parts {
			if i == len(parts)-1 {
				if _, ok := node[p].(map[string]any); ok {
					return nil, fmt.Errorf("key %q: %s is a section, set its keys instead", k, k)
				}
				node[p] = set[k]
				break
			}
			next, ok := node[p].(map[string]any)
			if !ok {
				if _, isValue := node[p]; isValue {
					return nil, fmt.Errorf("key %q: %s is set as a value and used as a section", k, strings.Join(parts[:i+1], "."))
				}
				next = map[string]any{}
				node[p] = next
			}
			node = next
		}
	}
	return yaml.Marshal(root)
}

// decodeOverlay decodes an overlay document over cfg the way Parse decodes
// a file, so a variant's bad key gets the same message a file's would;
// the overlay's own line numbers mean nothing to the user and are cut.
func decodeOverlay(doc []byte, cfg *Config) error {
	file, err := parser.ParseBytes(doc, 0)
	if err != nil || len(file.Docs) != 1 {
		return fmt.Errorf("cannot build the overlay: %v", err)
	}
	body := file.Docs[0].Body
	if err := checkScalars(body); err != nil {
		return trimPosition(decodeError("set", body, err))
	}
	if err := decode(body, cfg); err != nil {
		return trimPosition(decodeError("set", body, err))
	}
	return nil
}

var overlayPosition = regexp.MustCompile(`^set(:\d+:\d+)?: `)

func trimPosition(err error) error {
	return fmt.Errorf("%s", overlayPosition.ReplaceAllString(err.Error(), ""))
}

// checkVariants reports misnamed variants and keys a variant may not set.
func (c Config) checkVariants(bad func(path, format string, args ...any)) {
	seen := map[string]bool{}
	for i, v := range c.Variants {
		path := fmt.Sprintf("variants[%d]", i)
		if !variantName.MatchString(v.Name) {
			bad(path+".name", "%q: use 1-32 characters from a-z, 0-9 and '-'", v.Name)
		} else if seen[v.Name] {
			bad(path+".name", "%q is defined twice", v.Name)
		}
		seen[v.Name] = true
		if len(v.Set) == 0 {
			bad(path+".set", "a variant must change at least one key")
		}
		for k := range v.Set {
			for _, f := range fixedKeys {
				if k == f || strings.HasPrefix(k, f+".") {
					bad(path+".set", "%s cannot differ between variants of a run", k)
				}
			}
		}
		if len(c.Run.ID)+1+len(v.Name) > 64 {
			bad(path+".name", "run id %s-%s would be longer than 64 characters", c.Run.ID, v.Name)
		}
	}
	// Applying a variant re-validates the whole configuration, so it is
	// tried only on a valid base: its problems are reported once, above.
	base := c
	base.Variants = nil
	base.Setups = nil
	if len(c.Variants) > 0 && len(base.problems()) == 0 {
		for i, v := range c.Variants {
			if _, err := c.Variant(v.Name); err != nil {
				bad(fmt.Sprintf("variants[%d].set", i), "%s", strings.TrimPrefix(err.Error(), "variants."+v.Name+": "))
			}
		}
	}
}
