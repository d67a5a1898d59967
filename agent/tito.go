package agent

import (
	"slices"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
)

// Chunk is one training sequence: the exact ids the sampler saw and
// produced. Loss covers sampled ids only, with the sampler's log-probs.
type Chunk struct {
	IDs      []int
	LogProbs []float32 // sampler log-prob of each sampled id; 0 elsewhere
	Loss     []bool
	// Turns holds the offset of each assistant turn's first sampled id.
	Turns []int
	// Opened says how the chunk began: "" for the first, else the repair
	// (new_chunk) or compaction that opened it.
	Opened string
	// Repairs counts the repairs at the turn boundaries inside the chunk.
	Repairs map[string]int

	segs    []segment
	sampled []int // every sampled id, in order: the loss region as produced
}

// segment is the span of one message in a chunk.
type segment struct {
	msg        int // index into the conversation
	start, end int
	loss       bool
}

// Assembler keeps the token stream of an episode (TITO): the sampler's own
// ids and log-probs, extended turn by turn, with the drift between the
// held ids and a fresh rendering of the conversation repaired and counted
// at every turn boundary.
type Assembler struct {
	tp     *moe.Chat
	msgs   []moe.Message
	chunks []*Chunk
	// Counts tallies the repair kind of every turn boundary.
	Counts map[string]int
	// LossDrift counts loss-region ids that differ from what the sampler
	// produced; the invariant is that it stays 0.
	LossDrift int
}

// NewAssembler opens the first chunk on msgs (system prompt, instruction).
// The harness's messages are system, user and assistant turns, which every
// chat template renders.
func NewAssembler(tp *moe.Chat, msgs []moe.Message) *Assembler {
	a := &Assembler{tp: tp, Counts: map[string]int{}}
	a.open(msgs, "")
	return a
}

func (a *Assembler) open(msgs []moe.Message, why string) {
	if len(a.chunks) > 0 {
		if !slices.Contains(a.cur().Loss, true) {
			// Never sampled from: replaced, not kept as an empty sequence.
			a.chunks = a.chunks[:len(a.chunks)-1]
		} else {
			a.cur().trim()
		}
	}
	a.msgs = slices.Clone(msgs)
	c := &Chunk{Opened: why}
	for i, m := range a.msgs {
		c.add(render(a.tp, m), nil, i, false)
	}
	c.add(a.tp.Header(), nil, -1, false)
	a.chunks = append(a.chunks, c)
}

// trim drops the ids after the chunk's last sampled id (context the
// policy never answered): a closed chunk carries no loss and no routing
// past its last sample.
func (c *Chunk) trim() {
	last := -1
	for i, l := range c.Loss {
		if l {
			last = i
		}
	}
	if last < 0 {
		return
	}
	c.IDs, c.LogProbs, c.Loss = c.IDs[:last+1], c.LogProbs[:last+1], c.Loss[:last+1]
	segs := c.segs[:0]
	for _, s := range c.segs {
		if s.start <= last {
			s.end = min(s.end, last+1)
			segs = append(segs, s)
		}
	}
	c.segs = segs
}

// Close ends the episode's token stream: the last chunk is trimmed like
// every closed chunk.
func (a *Assembler) Close() { a.cur().trim() }

func (c *Chunk) add(ids []int, lp []float32, msg int, loss bool) {
	start := len(c.IDs)
	c.IDs = append(c.IDs, ids...)
	for i := range ids {
		c.Loss = append(c.Loss, loss)
		if lp != nil {
			c.LogProbs = append(c.LogProbs, lp[i])
		} else {
			c.LogProbs = append(c.LogProbs, 0)
		}
	}
	if msg >= 0 {
		c.segs = append(c.segs, segment{msg: msg, start: start, end: len(c.IDs), loss: loss})
	}
}

func (a *Assembler) cur() *Chunk { return a.chunks[len(a.chunks)-1] }

// Prompt is what the sampler gets next: the current chunk's ids.
func (a *Assembler) Prompt() []int { return a.cur().IDs }

// Chunks returns the chunks so far; the last one is open.
func (a *Assembler) Chunks() []*Chunk { return a.chunks }

// Messages is the conversation as text.
func (a *Assembler) Messages() []moe.Message { return a.msgs }

// Sampled appends a sampled turn (ids and their log-probs, the stop token
// included when it was sampled) and returns its text, which joins the
// conversation as the assistant's message.
func (a *Assembler) Sampled(ids []int, logprobs []float32) string {
	c := a.cur()
	c.Turns = append(c.Turns, len(c.IDs))
	// The header was added with the previous context; the assistant's
	// segment starts there so that it renders as one message.
	hdr := len(c.IDs) - len(a.tp.Header())
	c.add(ids, logprobs, -1, true)
	c.sampled = append(c.sampled, ids...)
	c.segs = append(c.segs, segment{msg: len(a.msgs), start: hdr, end: len(c.IDs), loss: true})
	text, err := a.tp.Tokenizer().Decode(a.tp.Reply(ids))
	if err != nil {
		text = "" // ids outside the vocabulary cannot come from the sampler
	}
	a.msgs = append(a.msgs, moe.Message{Role: moe.RoleAssistant, Content: text})
	return text
}

// Next adds the messages that follow the last sample (the observation),
// re-renders the conversation and reconciles it with the held ids:
//
//	strict_prefix   the rendering extends the held ids: append the rest
//	clipped_norm    only boundary tokens differ (a turn cut off before its
//	                end token): clip and normalise them to the template's
//	text_retokened  only non-loss text differs: re-tokenise that text
//	new_chunk       anything else (the sampled ids do not re-encode as
//	                sampled): close the chunk, open one on the rendering
//
// It returns the repair applied.
func (a *Assembler) Next(msgs ...moe.Message) string {
	a.msgs = append(a.msgs, msgs...)
	c := a.cur()
	kind := schemas.RepairStrictPrefix
	var fixes []func()
	for _, s := range c.segs {
		held := c.IDs[s.start:s.end]
		want := render(a.tp, a.msgs[s.msg])
		if slices.Equal(held, want) {
			continue
		}
		switch {
		case s.loss && slices.Equal(append(slices.Clone(held), a.tp.End()), want):
			// The turn stopped at the token budget, before its end token.
			if kind == schemas.RepairStrictPrefix {
				kind = schemas.RepairClippedNorm
			}
			fixes = append(fixes, func() { c.splice(s, want, s.end-s.start) })
		case !s.loss:
			if kind != schemas.RepairNewChunk {
				kind = schemas.RepairTextRetokened
			}
			fixes = append(fixes, func() { c.splice(s, want, 0) })
		default:
			kind = schemas.RepairNewChunk
		}
	}
	a.Counts[kind]++
	if kind != schemas.RepairNewChunk {
		if c.Repairs == nil {
			c.Repairs = map[string]int{}
		}
		c.Repairs[kind]++
	}
	if kind == schemas.RepairNewChunk {
		a.open(a.msgs, kind)
		return kind
	}
	// Apply the repairs from the last segment backwards so earlier
	// offsets stay valid.
	for i := len(fixes) - 1; i >= 0; i-- {
		fixes[i]()
	}
	for i := len(a.msgs) - len(msgs); i < len(a.msgs); i++ {
		c.add(render(a.tp, a.msgs[i]), nil, i, false)
	}
	c.add(a.tp.Header(), nil, -1, false)
	a.check(c)
	return kind
}

// splice replaces the ids of segment s by want, keeping the first keep ids
// (and their loss flags and log-probs) as they are.
func (c *Chunk) splice(s segment, want []int, keep int) {
	n := len(want) - (s.end - s.start)
	ids := slices.Concat(c.IDs[:s.start+keep], want[keep:], c.IDs[s.end:])
	lps := slices.Concat(c.LogProbs[:s.start+keep], make([]float32, len(want)-keep), c.LogProbs[s.end:])
	loss := slices.Concat(c.Loss[:s.start+keep], make([]bool, len(want)-keep), c.Loss[s.end:])
	c.IDs, c.LogProbs, c.Loss = ids, lps, loss
	for i := range c.segs {
		switch {
		case c.segs[i].start == s.start:
			c.segs[i].end += n
		case c.segs[i].start > s.start:
			c.segs[i].start += n
			c.segs[i].end += n
		}
	}
	for i := range c.Turns {
		if c.Turns[i] > s.start {
			c.Turns[i] += n
		}
	}
}

// check counts loss-region ids that differ from what the sampler
// produced. Repairs only ever touch non-loss ids, so this witnesses the
// invariant rather than enforcing it.
func (a *Assembler) check(c *Chunk) {
	j := 0
	for i, id := range c.IDs {
		if !c.Loss[i] {
			continue
		}
		if j >= len(c.sampled) || c.sampled[j] != id {
			a.LossDrift++
		}
		j++
	}
	a.LossDrift += max(0, len(c.sampled)-j)
}

// Compact replaces the conversation (a summary and the latest turns) and
// opens a new chunk on it: the context was about to outgrow the model.
func (a *Assembler) Compact(msgs []moe.Message) {
	a.Counts["compaction"]++
	a.open(msgs, "compaction")
}

// render is the chat rendering of the harness's own messages. They are
// system, user and assistant turns only, which moe.NewChat has checked the
// tokenizer for, so a failure is a bug of the harness.
func render(tp *moe.Chat, msgs ...moe.Message) []int {
	var out []int
	for _, m := range msgs {
		ids, err := tp.Message(m)
		if err != nil {
			panic("agent: " + err.Error())
		}
		out = append(out, ids...)
	}
	return out
}
