package schemas

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
)

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func payloadTypes() map[string]any {
	return map[string]any{
		RunStarted: RunStartedPayload{}, IterationStarted: IterationStartedPayload{}, SynthRequested: SynthRequestedPayload{},
		TaskSynthesized: TaskSynthesizedPayload{}, TaskAudited: TaskAuditedPayload{}, PoolSealed: PoolSealedPayload{},
		SFTRequested: SFTRequestedPayload{}, SFTCompleted: SFTCompletedPayload{}, RolloutRequested: RolloutRequestedPayload{},
		RolloutCompleted: RolloutCompletedPayload{}, RewardScored: RewardScoredPayload{}, BatchReady: BatchReadyPayload{},
		CriticUpdated: CriticUpdatedPayload{}, PolicyUpdated: PolicyUpdatedPayload{}, EvalRequested: EvalRequestedPayload{},
		EvalCompleted: EvalCompletedPayload{}, SynthCandidate: SynthCandidatePayload{}, SynthDiscarded: SynthDiscardedPayload{},
		RunCompleted: RunCompletedPayload{}, RunFailed: RunCompletedPayload{},
	}
}

// Every payload has snake_case JSON names (nested types included),
// every event type is a valid engine type, and a filled payload survives
// an engine envelope round trip.
func TestEventPayloads(t *testing.T) {
	var check func(rt reflect.Type, where string)
	check = func(rt reflect.Type, where string) {
		switch rt.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer:
			check(rt.Elem(), where)
			return
		case reflect.Struct:
		default:
			return
		}
		for i := range rt.NumField() {
			f := rt.Field(i)
			tag := f.Tag.Get("json")
			name := tag
			if j := strings.IndexByte(tag, ','); j >= 0 {
				name = tag[:j]
			}
			if !snake.MatchString(name) {
				t.Errorf("%s.%s: JSON name %q is not snake_case", where, f.Name, name)
			}
			check(f.Type, where+"."+f.Name)
		}
	}
	rng := newRand(5)
	for typ, p := range payloadTypes() {
		if err := engine.ValidType(typ); err != nil {
			t.Error(err)
		}
		rt := reflect.TypeOf(p)
		check(rt, rt.Name())
		v := reflect.New(rt)
		fillJSON(rng, v.Elem())
		ev, err := engine.NewRootEvent("r1", typ, "k", v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back engine.Event
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		got := reflect.New(rt)
		if err := back.Decode(got.Interface()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Elem().Interface(), v.Elem().Interface()) {
			t.Errorf("%s: payload changed in the envelope:\n%+v\n%+v", typ, v.Elem(), got.Elem())
		}
	}
}
