package config

import (
	"fmt"
	"slices"
	"strings"
)

// Setup is a named configuration kept in the same file as the base one:
// the file's configuration with a set of keys changed, a run id of its
// own, and variants of its own. One file can so hold a reproduction's
// configurations that differ in many keys, each with its ablations,
// selected by name (t1 --setup NAME) instead of by a file each.
type Setup struct {
	Name string `yaml:"name"`
	// Set maps dotted key paths of this file to the values the setup uses
	// instead, as a variant's Set does; run.id is required.
	Set map[string]any `yaml:"set"`
	// Variants are the setup's ablations, in place of the file's: the
	// file's variants vary the file's run, not this one. None when empty.
	Variants []Variant `yaml:"variants"`
}

// setupKeys are the keys a setup may not set: a setup has its variants in
// its own variants list and names no further setup.
var setupKeys = []string{"variants", "setups"}

// SetupNames lists the configured setups in file order.
func (c Config) SetupNames() []string {
	names := make([]string, len(c.Setups))
	for i, s := range c.Setups {
		names[i] = s.Name
	}
	return names
}

// Setup returns the configuration of the setup called name: the receiver
// with the setup's keys set and the setup's variants in place of its own,
// validated. It has no setups itself. An unknown name is an error that
// lists the configured ones.
func (c Config) Setup(name string) (Config, error) {
	i := slices.IndexFunc(c.Setups, func(s Setup) bool { return s.Name == name })
	if i < 0 {
		if len(c.Setups) == 0 {
			return Config{}, fmt.Errorf("setups: no setup %q: the configuration has no setups", name)
		}
		return Config{}, fmt.Errorf("setups: no setup %q (configured: %s)", name, strings.Join(c.SetupNames(), ", "))
	}
	s := c.Setups[i]
	out, err := c.overlaid(s.Set)
	if err != nil {
		return Config{}, fmt.Errorf("setups.%s: %w", name, err)
	}
	out.Variants = slices.Clone(s.Variants)
	if err := out.Validate(); err != nil {
		return Config{}, fmt.Errorf("setups.%s: %w", name, err)
	}
	return out, nil
}

// checkSetups reports misnamed setups, keys a setup may not set, and
// every problem of each setup's configuration and of its variants.
func (c Config) checkSetups(bad func(path, format string, args ...any)) {
	seen := map[string]bool{}
	for i, s := range c.Setups {
		path := fmt.Sprintf("setups[%d]", i)
		if !variantName.MatchString(s.Name) {
			bad(path+".name", "%q: use 1-32 characters from a-z, 0-9 and '-'", s.Name)
		} else if seen[s.Name] {
			bad(path+".name", "%q is defined twice", s.Name)
		}
		seen[s.Name] = true
		for k := range s.Set {
			for _, f := range setupKeys {
				if k == f || strings.HasPrefix(k, f+".") {
					bad(path+".set", "%s cannot be set by a setup (give its variants in the setup's own variants list)", k)
				}
			}
		}
		id, ok := s.Set["run.id"]
		switch {
		case !ok:
			bad(path+".set", "run.id is required: a setup's runs need ids of their own")
		case fmt.Sprint(id) == c.Run.ID:
			bad(path+".set", "run.id %v is the file's own: give the setup a run id of its own", id)
		}
	}
	// Applying a setup re-validates the whole configuration, so it is
	// tried only on a valid base: its problems are reported once, above.
	base := c
	base.Setups = nil
	base.Variants = nil
	if len(c.Setups) == 0 || len(base.problems()) > 0 {
		return
	}
	ids := map[string]string{}
	for i, s := range c.Setups {
		sc, err := c.Setup(s.Name)
		if err != nil {
			bad(fmt.Sprintf("setups[%d].set", i), "%s", strings.TrimPrefix(err.Error(), "setups."+s.Name+": "))
			continue
		}
		if other, dup := ids[sc.Run.ID]; dup {
			bad(fmt.Sprintf("setups[%d].set", i), "run.id %s is setup %s's too", sc.Run.ID, other)
		}
		ids[sc.Run.ID] = s.Name
	}
}
