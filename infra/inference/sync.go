package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// WeightLoader is a remote engine that loads new weights without a
// restart: SGLang's POST /update_weights_from_disk (t1 serve-policy
// answers it too), vLLM's POST /collective_rpc reload_weights.
type WeightLoader interface {
	Engine
	// LoadWeights makes the engine serve the checkpoint at path (a
	// directory the server can read, or an object-store prefix for t1
	// serve-policy) as weight version version.
	LoadWeights(ctx context.Context, path, version string) error
}

// ErrStaleWeights marks a generation served by other weights than the
// version the caller holds: the engine was updated behind its back.
var ErrStaleWeights = errors.New("stale engine weights")

// Synced shares one remote engine between policy versions. The engine
// holds one set of weights at a time, so an episode holds its version
// (Hold) for as long as it samples: a version is loaded only once no
// episode holds another, and every answer that names its weight version
// is checked against the held one.
type Synced struct {
	eng WeightLoader

	mu      sync.Mutex
	changed *sync.Cond
	cur     string // the loaded version; "" before the first load
	path    func(context.Context) (string, error)
	holders int
	loads   int
	// epoch counts loads, so that concurrent episodes that see the same
	// restart reload once.
	epoch  int
	loaded map[string]bool // every version this Synced loaded
}

// NewSynced wraps eng, whose loaded weights are unknown until the first
// Hold loads a version.
func NewSynced(eng WeightLoader) *Synced {
	s := &Synced{eng: eng, loaded: map[string]bool{}}
	s.changed = sync.NewCond(&s.mu)
	return s
}

// Hold makes the engine serve version, loading it from path() when another
// version is loaded (after every holder of that one has released it), and
// returns the engine pinned to version and the release function, which
// must be called once the episode is done. path is called only when a
// load is needed.
func (s *Synced) Hold(ctx context.Context, version string, path func(context.Context) (string, error)) (Engine, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Cond has no context: a cancelled waiter is woken by the broadcast
	// that stop sends.
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.changed.Broadcast()
	})
	defer stop()
	for s.cur != version && s.holders > 0 {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		s.changed.Wait()
	}
	if s.cur == version && s.holders == 0 {
		// The engine may have restarted while nobody sampled (during an
		// update, typically): one that says which weights it serves is
		// asked, since its replies do not say.
		if vr, ok := s.eng.(versionReporter); ok {
			served, known, err := vr.ServedVersion(ctx)
			if err != nil {
				return nil, nil, err
			}
			if known && served != version {
				s.cur = ""
			}
		}
	}
	if s.cur != version {
		// Nobody holds the loaded weights: swap them. The lock stays held,
		// so no one samples meanwhile.
		p, err := path(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("weights of version %s: %w", version, err)
		}
		s.cur = ""
		if err := s.eng.LoadWeights(ctx, p, version); err != nil {
			return nil, nil, err
		}
		s.cur, s.path = version, path
		s.loads++
		s.epoch++
		s.loaded[version] = true
	}
	s.holders++
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.holders--
			s.changed.Broadcast()
		})
	}
	return pinned{s: s, version: version}, release, nil
}

// versionReporter is an engine whose replies do not name their weight
// version but that can be asked for it (vLLM 0.34's GET /weight_info);
// known is false where the server cannot say.
type versionReporter interface {
	ServedVersion(ctx context.Context) (version string, known bool, err error)
}

// restarted tells an engine that lost its weights behind t1's back from
// one updated to another version: SGLang reads weight_version "default"
// after a restart (SGLang 0.5.23, python/sglang/srt/server_args.py), and
// a version this Synced never loaded means a fresh engine too.
func (s *Synced) restarted(served string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return served == "default" || !s.loaded[served]
}

// reload loads the held version again after an engine restart, unless
// another episode did since epoch.
func (s *Synced) reload(ctx context.Context, version string, epoch int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch {
		return nil
	}
	if s.cur != version || s.path == nil {
		return fmt.Errorf("%w: version %s is no longer loaded", ErrStaleWeights, version)
	}
	p, err := s.path(ctx)
	if err != nil {
		return fmt.Errorf("weights of version %s: %w", version, err)
	}
	if err := s.eng.LoadWeights(ctx, p, version); err != nil {
		return fmt.Errorf("reloading version %s after the engine restarted: %w", version, err)
	}
	s.loads++
	s.epoch++
	return nil
}

// serving is the version loaded now ("" before the first load).
func (s *Synced) serving() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// forget drops what t1 knows of the engine's weights after it failed to
// answer: it may come back restarted, with none of them, so the next Hold
// loads its version again. Episodes holding it fail over or end first.
func (s *Synced) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = ""
	s.epoch++
	clear(s.loaded)
	s.changed.Broadcast()
}

func (s *Synced) currentEpoch() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// Loads counts the weight loads so far.
func (s *Synced) Loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// pinned refuses answers from weights other than version's. An answer
// from a restarted engine (weight version "default", or one never loaded)
// makes it load version again and ask once more.
type pinned struct {
	s       *Synced
	version string
}

func (p pinned) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	for try := 0; ; try++ {
		epoch := p.s.currentEpoch()
		resp, err := p.s.eng.Generate(ctx, req)
		if err != nil {
			return nil, err
		}
		// vLLM reports no version: Hold's serialisation is then the guarantee.
		if resp.WeightVersion == "" || resp.WeightVersion == p.version {
			resp.WeightVersion = p.version
			return resp, nil
		}
		if try == 0 && p.s.restarted(resp.WeightVersion) {
			if err := p.s.reload(ctx, p.version, epoch); err != nil {
				return nil, err
			}
			continue
		}
		return nil, fmt.Errorf("%w: the engine served weight version %q, the episode samples version %q", ErrStaleWeights, resp.WeightVersion, p.version)
	}
}

// LoadWeights implements WeightLoader with POST /update_weights_from_disk.
func (c *SGLang) LoadWeights(ctx context.Context, path, version string) error {
	return c.UpdateWeightsFromDisk(ctx, path, version)
}

// LoadWeights implements WeightLoader with vLLM's POST /collective_rpc
// {"method": "reload_weights", "kwargs": {"weights_path": path}}, which a
// server started with VLLM_SERVER_DEV_MODE=1 exposes (it answers an empty
// 200, or {"results": [...]}), then POST /reset_prefix_cache, since
// reload_weights keeps the prefix cache of the old weights (vLLM 0.21.0
// and 0.34.0, vllm/entrypoints/serve/dev). vLLM keeps no weight version
// t1 relies on, so version is the caller's to track. Both calls share
// LoadTimeout.
func (c *VLLM) LoadWeights(ctx context.Context, path, version string) error {
	if _, err := c.ServerVersion(ctx); err != nil {
		return err
	}
	if c.opt.LoadTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opt.LoadTimeout)
		defer cancel()
	}
	body, err := json.Marshal(map[string]any{"method": "reload_weights", "kwargs": map[string]string{"weights_path": path}})
	if err != nil {
		return err
	}
	if err := postJSON(ctx, c.hc, 0, c.opt.URL+"/collective_rpc", body, nil); err != nil {
		return fmt.Errorf("vllm: reload weights of version %s from %s (start vLLM with VLLM_SERVER_DEV_MODE=1): %w", version, path, err)
	}
	if err := c.resetPrefixCache(ctx); err != nil {
		return fmt.Errorf("vllm: after loading version %s: %w", version, err)
	}
	// Servers with the RL dev router (0.34.0) keep a weight version that
	// reads "default" again after a restart; older ones answer 404.
	body, err = json.Marshal(map[string]string{"new_version": version})
	if err != nil {
		return err
	}
	if err := postJSON(ctx, c.hc, 0, c.opt.URL+"/update_weight_version", body, nil); err != nil && !isNotFound(err) {
		return fmt.Errorf("vllm: set weight version %s: %w", version, err)
	}
	return nil
}

// ServedVersion implements versionReporter with GET /weight_info, which
// servers before the RL dev router answer 404 (known false).
func (c *VLLM) ServedVersion(ctx context.Context) (string, bool, error) {
	var v struct {
		WeightVersion *string `json:"weight_version"`
	}
	if err := getJSON(ctx, c.hc, c.opt.Timeout, c.opt.URL+"/weight_info", &v); err != nil {
		if isNotFound(err) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("vllm: %w", err)
	}
	if v.WeightVersion == nil {
		return "", false, fmt.Errorf("vllm: %s/weight_info answered no weight_version", c.opt.URL)
	}
	return *v.WeightVersion, true, nil
}

// resetPrefixCache is POST /reset_prefix_cache, a dev-mode endpoint: 0.21.0
// answers an empty 200, 0.34.0 {"success": bool}.
func (c *VLLM) resetPrefixCache(ctx context.Context) error {
	var res json.RawMessage
	if err := postJSON(ctx, c.hc, 0, c.opt.URL+"/reset_prefix_cache", nil, &res); err != nil {
		return fmt.Errorf("reset the prefix cache: %w", err)
	}
	if len(res) > 0 {
		var ok struct {
			Success *bool `json:"success"`
		}
		if json.Unmarshal(res, &ok) == nil && ok.Success != nil && !*ok.Success {
			return fmt.Errorf("%s/reset_prefix_cache answered success false: cached prefixes of the old weights remain", c.opt.URL)
		}
	}
	return nil
}

// Probe checks that every configured remote engine answers GET /health
// and, when o.Model gives the served model's shape, one request as t1
// makes them (probeServes), so a run fails at its start, not at its first
// rollout; the error is one line naming the URL. The reference backend
// needs no probe.
func Probe(ctx context.Context, o Options) error {
	if o.Backend == BackendReference {
		return nil
	}
	urls := o.Endpoints()
	if len(urls) == 0 {
		_, err := Open(ctx, o, nil)
		return err
	}
	for _, u := range urls {
		one := o
		one.URL, one.URLs = u, nil
		if err := probe(ctx, one); err != nil {
			return err
		}
	}
	return nil
}

func probe(ctx context.Context, o Options) error {
	if _, err := Open(ctx, o, nil); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := o.URL + "/health"
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("inference: %s engine at %s: %w", o.Backend, o.URL, err)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // the URL is named once, below
		}
		return fmt.Errorf("inference: the %s engine at %s does not answer (%v); start it or set inference.url", o.Backend, o.URL, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("inference: the %s engine at %s answered GET /health with HTTP %d; wait until it is ready or fix inference.url", o.Backend, o.URL, res.StatusCode)
	}
	if o.Model.Layers == 0 {
		return nil // the shape is not known yet (a checkpoint in the object store)
	}
	return probeServes(ctx, o)
}

// probeServes asks the engine for one greedy token with its log-prob and
// routed experts, so that a server started without what t1 needs is
// refused before anything runs, naming the flag: routing comes back only
// with --enable-return-routed-experts, and its shape must be the
// checkpoint's (an engine serving another model fails to decode). vLLM
// must also run in dev mode, where t1 loads weights and resets the
// prefix cache.
func probeServes(ctx context.Context, o Options) error {
	eng, err := Open(ctx, o, nil)
	if err != nil {
		return err
	}
	if v, ok := eng.(*VLLM); ok {
		if err := v.resetPrefixCache(ctx); err != nil {
			return fmt.Errorf("inference: the vllm engine at %s: %w (start vLLM with VLLM_SERVER_DEV_MODE=1: t1 loads each policy version through /collective_rpc)", o.URL, err)
		}
	}
	resp, err := eng.Generate(ctx, GenerateRequest{InputIDs: []int{0}, SamplingParams: SamplingParams{TopP: 1, MaxNewTokens: 1},
		ReturnLogprob: true, ReturnRoutedExperts: true})
	if err != nil {
		return fmt.Errorf("inference: a one-token request to the %s engine at %s failed: %w (is it serving inference.checkpoint's model?)", o.Backend, o.URL, err)
	}
	if resp.RoutedExperts == nil {
		return fmt.Errorf("inference: the %s engine at %s: %s; t1 records every token's experts to train with routing replay", o.Backend, o.URL, resp.RoutingUnavailable)
	}
	return nil
}
