package agent

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

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
	// view is the text the held ids stand for in the template's rendering
	// (whole-conversation templates): a sampled turn cut inside a UTF-8
	// sequence stands for its text without the cut character.
	view string
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
// at every turn boundary. A template that renders message by message
// (OwnChat) is reconciled message by message; any other (a model's Jinja
// Template) by re-rendering and diffing the whole conversation.
type Assembler struct {
	chat   Chat
	pm     *ownChat  // message by message; nil for a whole-conversation template
	tmpl   *Template // whole conversation
	msgs   []Message
	chunks []*Chunk
	// Counts tallies the repair kind of every turn boundary.
	Counts map[string]int
	// LossDrift counts loss-region ids that differ from what the sampler
	// produced; the invariant is that it stays 0.
	LossDrift int
}

// NewAssembler opens the first chunk on msgs (system prompt, instruction).
func NewAssembler(chat Chat, msgs []Message) (*Assembler, error) {
	a := &Assembler{chat: chat, Counts: map[string]int{}}
	switch c := chat.(type) {
	case ownChat:
		a.pm = &c
	case *Template:
		a.tmpl = c
	default:
		return nil, fmt.Errorf("agent: chat %T is neither t1's template nor a model's Jinja template", chat)
	}
	return a, a.open(msgs, "")
}

func (a *Assembler) open(msgs []Message, why string) error {
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
	if a.pm == nil {
		esc, err := a.tmpl.renderEscaped(a.msgs)
		if err != nil {
			return err
		}
		c.add(a.tmpl.tokenize(esc), nil, -1, false)
		c.view = a.tmpl.unescape(esc)
		a.chunks = append(a.chunks, c)
		return nil
	}
	for i, m := range a.msgs {
		ids, err := a.pm.message(m)
		if err != nil {
			return err
		}
		c.add(ids, nil, i, false)
	}
	c.add(a.pm.c.Header(), nil, -1, false)
	a.chunks = append(a.chunks, c)
	return nil
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
func (a *Assembler) Messages() []Message { return a.msgs }

// Sampled appends a sampled turn (ids and their log-probs, the stop token
// included when it was sampled) and returns its text, which joins the
// conversation as the assistant's message.
func (a *Assembler) Sampled(ids []int, logprobs []float32) string {
	return a.sample(ids, logprobs, true)
}

// Summary appends a sampled turn that is the policy's own summary of the
// episode so far, in the loss or not: it is trained on only when loss is
// set. The next Compact opens the chunk that carries it on.
func (a *Assembler) Summary(ids []int, logprobs []float32, loss bool) string {
	return a.sample(ids, logprobs, loss)
}

func (a *Assembler) sample(ids []int, logprobs []float32, loss bool) string {
	c := a.cur()
	if loss {
		c.Turns = append(c.Turns, len(c.IDs))
		c.sampled = append(c.sampled, ids...)
	}
	start := len(c.IDs)
	c.add(ids, logprobs, -1, loss)
	body := ids
	if n := len(ids); n > 0 && slices.Contains(a.chat.Stops(), ids[n-1]) {
		body = ids[:n-1]
	}
	text, err := a.chat.Tokenizer().Decode(body)
	if err != nil {
		text = "" // ids outside the vocabulary cannot come from the sampler
	}
	if a.pm != nil {
		// The header was added with the previous context; the assistant's
		// segment starts there so that it renders as one message.
		c.segs = append(c.segs, segment{msg: len(a.msgs), start: start - len(a.pm.c.Header()), end: len(c.IDs), loss: loss})
	} else {
		text = text[:len(text)-incompleteTail(text)]
		stop := ""
		if len(body) < len(ids) {
			stop, _ = a.chat.Tokenizer().Decode(ids[len(body):])
		}
		c.view += text + stop
	}
	a.msgs = append(a.msgs, Message{Role: "assistant", Content: text})
	return text
}

// incompleteTail is the length of a UTF-8 sequence cut off at the end of
// s (a reply stopped inside a character), 0 when s ends on a boundary.
func incompleteTail(s string) int {
	for n := 1; n <= min(utf8.UTFMax-1, len(s)); n++ {
		if b := s[len(s)-n]; b < 0x80 {
			return 0
		} else if b >= 0xC0 {
			if !utf8.FullRuneInString(s[len(s)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

// Next adds the messages that follow the last sample (the observation),
// re-renders the conversation and reconciles it with the held ids. The
// held ids up to the last sample are what the sampler saw and produced and
// never change; a repair decides what follows them:
//
//	strict_prefix   the rendering extends the held ids: append the rest
//	clipped_norm    the last turn was cut off before its end token (at
//	                max_tokens, perhaps inside a character): keep it as
//	                sampled, clip its text to whole characters and append the
//	                template's end of turn and the rest
//	text_retokened  the held ids spell a prefix of the rendering's text but
//	                tokenise differently (a non-canonical split, a
//	                decomposed accent, a newline merged with the template's):
//	                tokenise only the rest of the text
//	new_chunk       anything else (the template re-rendered history: dropped
//	                reasoning, re-serialised tool calls, normalised
//	                whitespace): close the chunk, open one on the rendering
//
// It returns the repair applied. For t1's own template, which renders
// message by message, the comparison is message by message.
func (a *Assembler) Next(msgs ...Message) (string, error) {
	a.msgs = append(a.msgs, msgs...)
	var kind string
	var err error
	if a.pm != nil {
		kind, err = a.nextMessages(len(msgs))
	} else {
		kind, err = a.nextConversation()
	}
	if err != nil {
		return "", err
	}
	a.Counts[kind]++
	if kind == schemas.RepairNewChunk {
		return kind, a.open(a.msgs, kind)
	}
	c := a.cur()
	if c.Repairs == nil {
		c.Repairs = map[string]int{}
	}
	c.Repairs[kind]++
	a.check(c)
	return kind, nil
}

// nextConversation re-renders the whole conversation and appends what
// follows the held ids, or reports a new chunk.
func (a *Assembler) nextConversation() (string, error) {
	c := a.cur()
	esc, err := a.tmpl.renderEscaped(a.msgs)
	if err != nil {
		return "", err
	}
	ids := a.tmpl.tokenize(esc)
	text := a.tmpl.unescape(esc)
	// The held ids end at the last sample: its last id says whether the
	// turn reached its end token.
	clipped := len(c.Turns) > 0 && !slices.Contains(a.chat.Stops(), c.IDs[len(c.IDs)-1])
	kind := schemas.RepairStrictPrefix
	var rest []int
	switch {
	case len(ids) >= len(c.IDs) && slices.Equal(ids[:len(c.IDs)], c.IDs):
		rest = ids[len(c.IDs):]
	case strings.HasPrefix(text, c.view):
		off := a.tmpl.escapedOffset(esc, len(c.view))
		if off < 0 {
			return schemas.RepairNewChunk, nil
		}
		kind = schemas.RepairTextRetokened
		rest = a.tmpl.tokenize(esc[off:])
	default:
		return schemas.RepairNewChunk, nil
	}
	if clipped {
		kind = schemas.RepairClippedNorm
	}
	c.add(rest, nil, -1, false)
	c.view = text
	return kind, nil
}

// nextMessages compares each held message with its own rendering.
func (a *Assembler) nextMessages(added int) (string, error) {
	c := a.cur()
	kind := schemas.RepairStrictPrefix
	var fixes []func()
	for _, s := range c.segs {
		held := c.IDs[s.start:s.end]
		want, err := a.pm.message(a.msgs[s.msg])
		if err != nil {
			return "", err
		}
		if slices.Equal(held, want) {
			continue
		}
		switch {
		case s.loss && slices.Equal(append(slices.Clone(held), a.pm.c.End()), want):
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
	if kind == schemas.RepairNewChunk {
		return kind, nil
	}
	// Apply the repairs from the last segment backwards so earlier
	// offsets stay valid.
	for i := len(fixes) - 1; i >= 0; i-- {
		fixes[i]()
	}
	for i := len(a.msgs) - added; i < len(a.msgs); i++ {
		ids, err := a.pm.message(a.msgs[i])
		if err != nil {
			return "", err
		}
		c.add(ids, nil, i, false)
	}
	c.add(a.pm.c.Header(), nil, -1, false)
	return kind, nil
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

// ChunkVersion opens a chunk of its own for the turns of a newer policy
// version (EpisodeLatest): one chunk's sampled log-probs and routing are
// then one policy's, which the trainer's importance weights and routing
// replay assume.
const ChunkVersion = "version"

// Reopen opens a new chunk on the conversation as it stands, for why.
func (a *Assembler) Reopen(why string) error {
	a.Counts[why]++
	return a.open(a.msgs, why)
}

// Compact replaces the conversation (a summary and the latest turns) and
// opens a new chunk on it: the context was about to outgrow the model.
func (a *Assembler) Compact(msgs []Message) error {
	a.Counts["compaction"]++
	return a.open(msgs, "compaction")
}
