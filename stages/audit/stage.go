package audit

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// StageConfig wires the audit stage.
type StageConfig struct {
	Store store.ObjectStore
	Trial trial.Options
	Settings
	// References are the evaluation suites' tasks the pool must stay
	// apart from.
	References []harbor.Reference
	TempDir    string
}

// NewStage returns the audit stage: task.synthesized → task.audited.
func NewStage(cfg StageConfig) engine.Stage {
	s := &stage{cfg: cfg}
	return engine.NewStage("audit", []string{schemas.TaskSynthesized}, s.handle)
}

type stage struct{ cfg StageConfig }

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.TaskSynthesizedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	work, releaseWork, err := hostres.MkdirTemp(s.cfg.TempDir, "t1-audit-", "audit scratch")
	if err != nil {
		return err
	}
	defer releaseWork()
	dir := filepath.Join(work, "task")
	t, _, err := trial.Fetch(ctx, s.cfg.Store, ev.Run, p.TaskID, p.Bundle, dir)
	if trial.Unusable(err) {
		return engine.Permanent(err)
	}
	if err != nil {
		return err
	}
	ev2 := Evidence{Task: t, References: s.cfg.References}
	oracle, err := trial.Run(ctx, dir, t, trial.Oracle(dir), s.cfg.Trial)
	if err != nil {
		return err
	}
	ev2.Oracle = Run{SolutionExit: oracle.SolutionExit, SolutionTimedOut: oracle.SolutionTimedOut, Report: oracle.Report}
	if s.cfg.Rerun {
		again, err := trial.Run(ctx, dir, t, trial.Oracle(dir), s.cfg.Trial)
		if err != nil {
			return err
		}
		ev2.Rerun = &Run{SolutionExit: again.SolutionExit, SolutionTimedOut: again.SolutionTimedOut, Report: again.Report}
	}
	null, err := trial.Run(ctx, dir, t, nil, s.cfg.Trial)
	if err != nil {
		return err
	}
	ev2.Null = Run{SolutionExit: null.SolutionExit, Report: null.Report}

	v := Audit(ev2, s.cfg.Settings)
	decision := "reject"
	if v.Accept {
		decision = "accept"
	}
	row := schemas.AuditRow{
		Run: ev.Run, TaskID: p.TaskID, Round: int32(p.Round), Dimensions: v.Dimensions(),
		Verifier: v.Facets.Verifier, Solution: v.Facets.Solution, Instruction: v.Facets.Instruction, Value: v.Facets.Value,
		Total: v.Total, RejectReasons: v.Rejects, Decision: decision, NearDupOf: v.NearDuplicateOf,
	}
	ref, err := schemas.WriteTable(ctx, s.cfg.Store, ev.Run, p.Round, []schemas.AuditRow{row}, schemas.WriterOptions{TempDir: s.cfg.TempDir})
	if err != nil {
		return err
	}
	_, err = out.Emit(schemas.TaskAudited, schemas.TaskAuditedPayload{
		TaskID: p.TaskID, Round: p.Round, Decision: decision, Total: v.Total, RejectReasons: v.Rejects, Audit: ref,
	}, engine.WithKey(p.TaskID))
	if err != nil {
		return fmt.Errorf("audit %s: %w", p.TaskID, err)
	}
	return nil
}

// Dimensions lists the eight scores with their facets, in the documented
// order.
func (v Verdict) Dimensions() []schemas.DimensionScore {
	s := v.Scores
	return []schemas.DimensionScore{
		{Name: "correctness", Facet: "verifier", Score: s.VerifierCorrectness},
		{Name: "strength", Facet: "verifier", Score: s.VerifierStrength},
		{Name: "validity", Facet: "solution", Score: s.SolutionValidity},
		{Name: "integrity", Facet: "solution", Score: s.SolutionIntegrity},
		{Name: "completeness", Facet: "instruction", Score: s.InstructionCompleteness},
		{Name: "clarity", Facet: "instruction", Score: s.InstructionClarity},
		{Name: "difficulty", Facet: "value", Score: s.ValueDifficulty},
		{Name: "novelty", Facet: "value", Score: s.ValueNovelty},
	}
}
