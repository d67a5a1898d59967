// Package lineage says what a continued branch is made of: the events of
// its parent (and theirs, for a branch of a branch) that lie upstream of
// its branch point, then its own. Control folds that history to decide
// what the branch does next, the pipeline finds in it the inputs the
// replayed stage re-runs, and the report reads the branch's evaluations
// and fine-tuning from it, so all three agree on where a branch begins.
//
// A Cut classifies the parent's events in log order against one branch
// point (Inherits, Replays); History walks a run's whole history through
// its lineage. It depends on the event log and the event types only.
package lineage
