package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// runs, and samples what it sampled; so does the attempt replayed into a
// branch, which finds the schedule under the run it branched from.
type latest struct {
	st       store.ObjectStore
	policies Policies
	lineage  []string // the run, then the runs it branched from
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
// stored for it (of this run or, replayed, of the run it branched from),
// else the newest the run has stored now.
func (l *latest) schedule(ctx context.Context, turn int) (int64, error) {
	v, found, err := l.recorded(ctx, turn)
	if err != nil {
		return 0, err
	}
	if !found {
		for v = l.cur; ; v++ {
			ok, err := l.stored(ctx, v+1)
			if err != nil {
				return 0, err
			}
			if !ok {
				break
			}
		}
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

// recorded is the version an ancestor's delivery of the attempt stored
// for turn, if any. The run's own record is PutOnce's to find.
func (l *latest) recorded(ctx context.Context, turn int) (v int64, found bool, err error) {
	for _, run := range l.lineage[min(1, len(l.lineage)):] {
		key := keys.AttemptTurn(run, l.attempt, turn)
		rc, _, err := l.st.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("turn %d version %s: %w", turn, key, err)
		}
		var tv turnVersion
		err = json.NewDecoder(io.LimitReader(rc, 1<<10)).Decode(&tv)
		rc.Close()
		if err != nil {
			return 0, false, fmt.Errorf("turn %d version %s: %w", turn, key, err)
		}
		return tv.PolicyVersion, true, nil
	}
	return 0, false, nil
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
