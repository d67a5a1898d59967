package schemas

import (
	"github.com/t1pipe/t1/internal/testinfra"

	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// doc.go documents every column of every table and every event with its
// fields; this keeps it from drifting.
func TestDocCoversTablesAndEvents(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := []Row{TaskRow{}, AuditRow{}, TrajectoryRow{}, TurnRow{}, TokenRow{}, RoutingRow{}, RewardRow{}, ValueRow{},
		MetricRow{}, EvalResultRow{}}
	for _, r := range rows {
		tbl := r.Table()
		i := strings.Index(doc, "// "+tbl.Name+" — grain: "+tbl.Grain+"; partition: "+tbl.Partition)
		if i < 0 {
			t.Errorf("doc.go lacks the %s table heading with grain and partition", tbl.Name)
			continue
		}
		section := doc[i:]
		if j := strings.Index(section[1:], "\n//\n"); j > 0 {
			section = section[:j+1]
		}
		section = strings.Join(strings.Fields(strings.ReplaceAll(section, "//", "")), " ")
		rt := reflect.TypeOf(r)
		for f := range rt.NumField() {
			if col := columnName(rt.Field(f)); !strings.Contains(section, col) {
				t.Errorf("doc.go, table %s: column %s undocumented", tbl.Name, col)
			}
		}
	}
	payloads := map[string]any{
		RunStarted: RunStartedPayload{}, IterationStarted: IterationStartedPayload{}, SynthRequested: SynthRequestedPayload{},
		TaskSynthesized: TaskSynthesizedPayload{}, TaskAudited: TaskAuditedPayload{}, PoolSealed: PoolSealedPayload{},
		SFTRequested: SFTRequestedPayload{}, SFTCompleted: SFTCompletedPayload{}, RolloutRequested: RolloutRequestedPayload{},
		RolloutCompleted: RolloutCompletedPayload{}, RewardScored: RewardScoredPayload{}, BatchReady: BatchReadyPayload{},
		CriticUpdated: CriticUpdatedPayload{}, PolicyUpdated: PolicyUpdatedPayload{}, EvalRequested: EvalRequestedPayload{},
		EvalCompleted: EvalCompletedPayload{}, SynthCandidate: SynthCandidatePayload{}, SynthDiscarded: SynthDiscardedPayload{},
		RunCompleted: RunCompletedPayload{}, RunFailed: RunCompletedPayload{},
	}
	if len(payloads) != len(EventTypes()) {
		t.Fatalf("%d payloads for %d event types", len(payloads), len(EventTypes()))
	}
	for _, typ := range EventTypes() {
		i := strings.Index(doc, "//\t"+typ+" ")
		if i < 0 {
			t.Errorf("doc.go lacks event %s", typ)
			continue
		}
		section := doc[i+3:]
		// The section runs to the next event name at the line start.
		lines := strings.Split(section, "\n")
		var text []string
		for n, l := range lines {
			if n > 0 && (!strings.HasPrefix(l, "//\t ") && !strings.HasPrefix(l, "//\t\t")) {
				break
			}
			text = append(text, l)
		}
		joined := strings.Join(text, " ")
		if !strings.Contains(joined, "producer:") || !strings.Contains(joined, "consumers:") {
			t.Errorf("doc.go, event %s: no producer/consumers", typ)
		}
		rt := reflect.TypeOf(payloads[typ])
		for f := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(f).Tag.Get("json"), ",")
			if !strings.Contains(joined, name) {
				t.Errorf("doc.go, event %s: field %s undocumented", typ, name)
			}
		}
	}
}
