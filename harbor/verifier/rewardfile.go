package verifier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParseRewardTxt reads Harbor's reward.txt: one number (e.g. "1", "0",
// "0.75"), surrounding whitespace allowed. It must be finite.
func ParseRewardTxt(data []byte) (float64, error) {
	s := string(bytes.TrimSpace(data))
	if s == "" {
		return 0, errors.New("empty")
	}
	if len(s) > 64 {
		return 0, fmt.Errorf("want one number, got %d bytes", len(s))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("want one number, got %q", bound(s, 64))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a finite number, got %s", s)
	}
	return v, nil
}

// ParseRewardJSON reads Harbor's reward.json: an object of metric names to
// numbers, e.g. {"reward": 1.0} or {"reward": 0.5, "accuracy": 0.8}. The
// primary value is "reward", or the only key when there is just one. All
// metrics come back even when there is no primary value (with an error).
func ParseRewardJSON(data []byte) (float64, map[string]float64, error) {
	if len(data) > MaxFileBytes {
		return 0, nil, fmt.Errorf("%d bytes, over the %d-byte limit", len(data), MaxFileBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return 0, nil, fmt.Errorf("want a JSON object of numbers: %w", err)
	}
	if raw == nil {
		return 0, nil, errors.New("want a JSON object of numbers, got null")
	}
	if len(raw) > 1000 {
		return 0, nil, fmt.Errorf("%d keys, over the limit of 1000", len(raw))
	}
	all := make(map[string]float64, len(raw))
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var v float64
		if err := json.Unmarshal(raw[k], &v); err != nil {
			return 0, nil, fmt.Errorf("%q: want a number, got %s", bound(k, 64), bound(strings.TrimSpace(string(raw[k])), 64))
		}
		all[bound(k, MaxNameBytes)] = v
	}
	if v, ok := all["reward"]; ok {
		return v, all, nil
	}
	if len(all) == 1 {
		for _, v := range all {
			return v, all, nil
		}
	}
	if len(all) == 0 {
		return 0, nil, errors.New("no metrics")
	}
	return 0, all, fmt.Errorf(`no "reward" key among %d metrics`, len(all))
}
