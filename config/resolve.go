package config

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
)

// Overrides are what a command line sets over the configuration file.
type Overrides struct {
	// Path is the file; empty looks at $T1_CONFIG, then ./pipeline.yaml,
	// else takes the built-in defaults.
	Path string
	// Setup names one of the file's setups to run instead of its own
	// configuration.
	Setup string
	// Data, over $T1_DATA, over the file's data.
	Data            string
	LogLevel        string
	AllowUnisolated bool
}

// Resolve finds the configuration, applies the overrides and the
// environment's, and returns the log level it names.
func Resolve(o Overrides) (Config, slog.Level, error) {
	var level slog.Level
	path := cmp.Or(o.Path, os.Getenv("T1_CONFIG"))
	if path == "" {
		if _, err := os.Stat("pipeline.yaml"); err == nil {
			path = "pipeline.yaml"
		}
	}
	cfg := Default()
	if path != "" {
		var err error
		if cfg, err = Load(path); err != nil {
			return cfg, level, err
		}
	}
	if o.Setup != "" {
		var err error
		if cfg, err = cfg.Setup(o.Setup); err != nil {
			return cfg, level, fmt.Errorf("%s: %w", cmp.Or(path, "built-in configuration"), err)
		}
	}
	cfg.Data = cmp.Or(o.Data, os.Getenv("T1_DATA"), cfg.Data)
	if o.AllowUnisolated {
		cfg.Sandbox.AllowUnisolated = true
	}
	cfg.LogLevel = cmp.Or(o.LogLevel, cfg.LogLevel)
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return cfg, level, fmt.Errorf("log level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	return cfg, level, nil
}
