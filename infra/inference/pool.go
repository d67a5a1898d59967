package inference

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Pool spreads episodes over several engine servers, each a Synced: t1
// balances them itself rather than through a data-parallel router
// (SGLang's router, or a proxy before vLLM) because weight sync has to
// reach every engine (a router forwards /generate, not a weight load to
// each worker, and vLLM's /collective_rpc has no router at all), and
// because t1 must know which weights answered each request.
//
// An episode holds one engine at a time. Each engine loads a version
// before it serves any request for it: in a synchronous run the first
// episodes of an iteration go to idle engines, so the engines load the
// new version in parallel. A request that an engine fails to answer
// (ErrUnavailable: refused, cut, timed out, 5xx) marks it down and is
// sent again, unchanged, to another engine holding the same version; the
// episode carries on there. A down engine is tried again after Retry,
// and reloads the version it is asked for first, since a restarted
// engine has lost whatever t1 loaded.
type Pool struct {
	// Retry is how long a failed engine is left alone.
	Retry time.Duration
	Log   *slog.Logger

	mu      sync.Mutex
	members []*member
}

type member struct {
	name   string
	synced *Synced
	// holders counts the episodes holding this engine through the pool;
	// down is when the engine last failed (zero: never, or recovered).
	holders int
	down    time.Time
	served  int
}

// NewPool balances over engines; names (their URLs) label them in logs
// and errors.
func NewPool(engines []WeightLoader, names []string) *Pool {
	p := &Pool{Retry: 15 * time.Second, Log: slog.Default()}
	for i, e := range engines {
		p.members = append(p.members, &member{name: names[i], synced: NewSynced(e)})
	}
	return p
}

// Hold pins an engine to version for one episode, as Synced.Hold does for
// one engine. The engine it returns fails over to the pool's other
// engines; release must be called once the episode is done.
func (p *Pool) Hold(ctx context.Context, version string, path func(context.Context) (string, error)) (Engine, func(), error) {
	h := &poolHold{pool: p, version: version, path: path}
	if err := h.acquire(ctx, nil); err != nil {
		return nil, nil, err
	}
	return h, h.release, nil
}

// Loads counts the weight loads of every engine.
func (p *Pool) Loads() int {
	n := 0
	for _, m := range p.members {
		n += m.synced.Loads()
	}
	return n
}

// Served counts the requests each engine answered, by name.
func (p *Pool) Served() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, m := range p.members {
		out[m.name] = m.served
	}
	return out
}

// pick chooses the engine for an episode of version, skipping avoid and
// engines down for less than Retry. Of the engines that can serve version
// now (they serve it, or nobody holds them, so they load it at once) it
// takes the least held, one that serves version on a tie; only when there
// is none, the least held of the others, where the episode waits for its
// holders to finish. Spreading over idle engines makes every engine load
// a new version as the iteration starts, in parallel.
func (p *Pool) pick(version string, avoid *member) (*member, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var best *member
	type key struct{ busy, holders, loads int }
	rank := func(m *member) key {
		k := key{holders: m.holders, loads: 1}
		if m.synced.serving() == version {
			k.loads = 0
		} else if m.holders > 0 {
			k.busy = 1
		}
		return k
	}
	less := func(a, b key) bool {
		if a.busy != b.busy {
			return a.busy < b.busy
		}
		if a.holders != b.holders {
			return a.holders < b.holders
		}
		return a.loads < b.loads
	}
	for _, m := range p.members {
		if m == avoid || (!m.down.IsZero() && now.Sub(m.down) < p.Retry) {
			continue
		}
		if best == nil || less(rank(m), rank(best)) {
			best = m
		}
	}
	if best == nil {
		return nil, fmt.Errorf("%w: all %d engines failed in the last %s", ErrUnavailable, len(p.members), p.Retry)
	}
	best.holders++
	return best, nil
}

// failed marks m down: it is left alone for Retry, and whatever it had
// loaded is forgotten, so its next episode loads its version again.
func (p *Pool) failed(m *member, err error) {
	p.mu.Lock()
	first := m.down.IsZero()
	m.down = time.Now()
	p.mu.Unlock()
	m.synced.forget()
	if first {
		p.Log.Warn("engine unavailable; its requests go to the other engines", "engine", m.name, "err", err)
	}
}

func (p *Pool) unhold(m *member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.holders--
}

func (p *Pool) answered(m *member) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.served++
	if !m.down.IsZero() {
		m.down = time.Time{}
		p.Log.Info("engine back", "engine", m.name)
	}
}

// poolHold is one episode's hold on the pool: the engine it samples from
// now, which changes when that one fails.
type poolHold struct {
	pool    *Pool
	version string
	path    func(context.Context) (string, error)

	mu   sync.Mutex
	m    *member // nil while the hold has no engine
	eng  Engine
	drop func() // releases m
	done bool
}

// acquire holds an engine for h's version other than avoid, trying each
// engine once when loading fails for want of an answer.
func (h *poolHold) acquire(ctx context.Context, avoid *member) error {
	var last error
	for range h.pool.members {
		m, err := h.pool.pick(h.version, avoid)
		if err != nil {
			if last != nil {
				return fmt.Errorf("%w (last: %w)", err, last)
			}
			return err
		}
		eng, release, err := m.synced.Hold(ctx, h.version, h.path)
		if err == nil {
			h.m, h.eng = m, eng
			h.drop = func() { release(); h.pool.unhold(m) }
			return nil
		}
		h.pool.unhold(m)
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return fmt.Errorf("engine %s: %w", m.name, err)
		}
		h.pool.failed(m, err)
		avoid, last = m, err
	}
	return last
}

func (h *poolHold) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	for try := 0; ; try++ {
		m, eng, err := h.engine(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := eng.Generate(ctx, req)
		if err == nil {
			h.pool.answered(m)
			return resp, nil
		}
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil || try == len(h.pool.members) {
			return nil, fmt.Errorf("engine %s: %w", m.name, err)
		}
		h.pool.failed(m, err)
		if err := h.move(ctx, m); err != nil {
			return nil, err
		}
	}
}

// engine is the engine h samples from, held anew when a move found none.
func (h *poolHold) engine(ctx context.Context) (*member, Engine, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return nil, nil, errors.New("inference: generate on a released engine hold")
	}
	if h.m == nil {
		if err := h.acquire(ctx, nil); err != nil {
			return nil, nil, err
		}
	}
	return h.m, h.eng, nil
}

// move releases the failed engine from and holds another for h's version.
func (h *poolHold) move(ctx context.Context, from *member) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m != from {
		return nil // a concurrent request moved already
	}
	h.drop()
	h.m, h.eng, h.drop = nil, nil, nil
	return h.acquire(ctx, from)
}

func (h *poolHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	h.done = true
	if h.drop != nil {
		h.drop()
	}
}
