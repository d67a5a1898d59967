package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/store"
)

// latest is the policy of a training attempt under episode_version latest
// (agent.Switcher): before each turn it moves to the newest policy
// version the run has stored, so an episode that outlives an update goes
// on with the updated policy. Which version samples a turn is stored
// once, before the turn (keys.AttemptTurn): a redelivered attempt replays
// the first delivery's schedule rather than whatever is newest when it
// runs, and samples what it sampled.
type latest struct {
	st       store.ObjectStore
	policies Policies
	run      string
	attempt  keys.Attempt
	cur      int64
	eng      inference.Engine
	release  func() // the hold on a shared remote engine, if any
	versions []int64
}

func (l *latest) Generate(ctx context.Context, req inference.GenerateRequest) (*inference.GenerateResponse, error) {
	l.versions = append(l.versions, l.cur)
	return l.eng.Generate(ctx, req)
}

// Switch implements agent.Switcher. A remote engine is released and held
// again for the new version between turns, never under a request.
func (l *latest) Switch(ctx context.Context, turn int) (bool, error) {
	v, err := l.schedule(ctx, turn)
	if err != nil || v == l.cur {
		return false, err
	}
	pol, err := l.policies(ctx, l.run, v)
	if err != nil {
		return false, fmt.Errorf("policy %d: %w", v, err)
	}
	eng := pol.Engine
	if pol.Hold != nil {
		l.close()
		e, release, err := pol.Hold(ctx)
		if err != nil {
			return false, fmt.Errorf("policy %d: %w", v, err)
		}
		eng, l.release = e, release
	}
	l.eng, l.cur = eng, v
	return true, nil
}

func (l *latest) close() {
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

type turnVersion struct {
	PolicyVersion int64 `json:"policy_version"`
}

// schedule is the version that samples turn: the one a delivery before
// stored for it, else the newest the run has stored now.
func (l *latest) schedule(ctx context.Context, turn int) (int64, error) {
	v := l.cur
	for {
		ok, err := l.stored(ctx, v+1)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		v++
	}
	body, _ := json.Marshal(turnVersion{PolicyVersion: v})
	key := keys.AttemptTurn(l.run, l.attempt, turn)
	stored, _, err := store.PutOnce(ctx, l.st, key, body, store.PutOptions{ContentType: "application/json"})
	if err != nil {
		return 0, fmt.Errorf("turn %d version: %w", turn, err)
	}
	var tv turnVersion
	if err := json.NewDecoder(bytes.NewReader(stored)).Decode(&tv); err != nil {
		return 0, fmt.Errorf("turn %d version %s: %w", turn, key, err)
	}
	return tv.PolicyVersion, nil
}

// stored reports whether policy version v of the run is stored whole: its
// weights (or their index) are written last.
func (l *latest) stored(ctx context.Context, v int64) (bool, error) {
	for _, f := range []string{moe.WeightsFile, moe.WeightsIndexFile} {
		_, err := l.st.Stat(ctx, path.Join(keys.Policy(l.run, v), f))
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return false, fmt.Errorf("policy %d: %w", v, err)
		}
	}
	return false, nil
}
