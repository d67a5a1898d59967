package taskgen

import (
	"fmt"
	"io/fs"

	"github.com/t1pipe/t1/harbor"
)

// Timeouts written into every synthesised task.toml.
const (
	AgentTimeoutSec    = 900
	VerifierTimeoutSec = 120
)

// Task renders sp as a Harbor task. The round is recorded as a tag, the
// lineage travels separately (see Lineage).
func (sp *Spec) Task(round int) (*harbor.Task, error) {
	b := harbor.NewBuilder(sp.ID()).
		Instruction(sp.Instruction).
		Metadata(harbor.Metadata{
			AuthorName: "t1 synth",
			Difficulty: sp.Difficulty,
			Category:   sp.Category,
			Tags:       []string{"synthesized", fmt.Sprintf("round-%d", round)},
		}).
		Timeouts(AgentTimeoutSec, VerifierTimeoutSec)
	for _, f := range sp.Files() {
		if f.Path == "instruction.md" {
			continue
		}
		b = b.File(f.Path, f.Data, fs.FileMode(f.mode()))
	}
	return b.Build()
}
