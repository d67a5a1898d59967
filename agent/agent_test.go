package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
)

func template(t *testing.T) *moe.Chat {
	t.Helper()
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := moe.NewChat(tok)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func TestParseReply(t *testing.T) {
	r, err := ParseReply("I will look first.\n<command>ls -la /app</command> then <command timeout=\"90\">make -j2</command>\n<task_complete/>")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Commands) != 2 || r.Commands[0].Script != "ls -la /app" || r.Commands[1].Timeout != 90*time.Second || !r.Complete {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{
		"", "just thinking", "<command>ls", "<command timeout=abc>ls</command>", "<command>   </command>",
		"<command foo=\"1\">ls</command>", "<command", strings.Repeat("<command>x</command>", MaxCommandsPerReply+1),
	} {
		if _, err := ParseReply(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseReply(f *testing.F) {
	f.Add("<command>echo hi</command><task_complete/>")
	f.Add("<command timeout=\"5\">sleep 1</command>")
	f.Add("<command><command></command>")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReply(s)
		if err == nil && len(r.Commands) == 0 && !r.Complete {
			t.Fatal("no error and nothing to do")
		}
		if len(r.Commands) > MaxCommandsPerReply {
			t.Fatal("too many commands")
		}
	})
}

func canonical(tp *moe.Chat, s string) []int { return append(tp.Content(s), tp.End()) }

// rendering is the chat template's rendering of the harness's messages.
func rendering(t *testing.T, tp *moe.Chat, msgs []Message) []int {
	t.Helper()
	ids, err := OwnChat(tp).Render(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestTITOStrictPrefix(t *testing.T) {
	tp := template(t)
	a := mustAssembler(t, OwnChat(tp), []Message{{Role: "system", Content: "You are an agent."}, {Role: "user", Content: "List /app."}})
	reply := "<command>ls /app</command>"
	ids := canonical(tp, reply)
	lps := make([]float32, len(ids))
	for i := range lps {
		lps[i] = -float32(i+1) / 10
	}
	if got := a.Sampled(ids, lps); got != reply {
		t.Fatalf("sampled text %q", got)
	}
	if k := next(t, a, "a.txt\nb.txt\n"); k != schemas.RepairStrictPrefix {
		t.Fatalf("repair %s", k)
	}
	c := a.Chunks()[0]
	if !slices.Equal(c.IDs, rendering(t, tp, a.Messages())) {
		t.Fatal("held ids differ from the rendering after a strict prefix")
	}
	var loss []int
	var lp []float32
	for i, l := range c.Loss {
		if l {
			loss, lp = append(loss, c.IDs[i]), append(lp, c.LogProbs[i])
		}
	}
	if !slices.Equal(loss, ids) || !slices.Equal(lp, lps) || a.LossDrift != 0 {
		t.Fatalf("loss region %v (log-probs %v), want the sampled %v", loss, lp, ids)
	}
}

func TestTITOClippedAtTokenBudget(t *testing.T) {
	tp := template(t)
	a := mustAssembler(t, OwnChat(tp), []Message{{Role: "user", Content: "go"}})
	ids := tp.Content("<command>echo cut") // no end token: the budget ran out
	a.Sampled(ids, make([]float32, len(ids)))
	if k := next(t, a, "the reply was cut off"); k != schemas.RepairClippedNorm {
		t.Fatalf("repair %s", k)
	}
	c := a.Chunks()[0]
	if !slices.Equal(c.IDs, rendering(t, tp, a.Messages())) {
		t.Fatal("held ids differ from the rendering after normalisation")
	}
	if i := slices.Index(c.IDs, tp.End()); i < 0 || c.Loss[c.Turns[0]+len(ids)] {
		t.Fatal("the normalised end token must not be in the loss region")
	}
	if a.LossDrift != 0 {
		t.Fatal("loss drift")
	}
}

// A sampled id sequence that is not how the text encodes (real tokenizers
// allow it: here, a word spelt byte by byte) cannot be kept as a prefix
// of the rendering: the chunk closes and a new one starts.
func TestTITONonCanonicalOpensNewChunk(t *testing.T) {
	tp := template(t)
	a := mustAssembler(t, OwnChat(tp), []Message{{Role: "user", Content: "go"}})
	word := "<command>ls</command>"
	var ids []int
	for _, b := range []byte(word) {
		ids = append(ids, int(b))
	}
	if slices.Equal(ids, tp.Content(word)) {
		t.Skip("the tokenizer encodes this word byte by byte")
	}
	ids = append(ids, tp.End())
	a.Sampled(ids, make([]float32, len(ids)))
	if k := next(t, a, "out"); k != schemas.RepairNewChunk {
		t.Fatalf("repair %s", k)
	}
	if len(a.Chunks()) != 2 || a.Chunks()[1].Opened != schemas.RepairNewChunk {
		t.Fatal("no new chunk")
	}
	if !slices.Equal(a.Prompt(), rendering(t, tp, a.Messages())) {
		t.Fatal("the new chunk is not the rendering")
	}
	first := a.Chunks()[0]
	var loss []int
	for i, l := range first.Loss {
		if l {
			loss = append(loss, first.IDs[i])
		}
	}
	if !slices.Equal(loss, ids) {
		t.Fatal("the closed chunk lost its sampled ids")
	}
}

func TestTITOTextRetokenised(t *testing.T) {
	tp := template(t)
	a := mustAssembler(t, OwnChat(tp), []Message{{Role: "user", Content: "first observation, long"}})
	ids := canonical(tp, "<command>pwd</command>")
	a.Sampled(ids, make([]float32, len(ids)))
	// The harness shortened an earlier observation (non-loss text).
	a.msgs[0].Content = "first observation"
	if k := next(t, a, "/app"); k != schemas.RepairTextRetokened {
		t.Fatalf("repair %s", k)
	}
	if !slices.Equal(a.Prompt(), rendering(t, tp, a.Messages())) || a.LossDrift != 0 {
		t.Fatal("retokenised context differs from the rendering")
	}
}

func mustAssembler(t *testing.T, chat Chat, msgs []Message) *Assembler {
	t.Helper()
	a, err := NewAssembler(chat, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// next adds an observation and returns the repair of its boundary.
func next(t *testing.T, a *Assembler, obs string) string {
	t.Helper()
	k, err := a.Next(Message{Role: a.chat.ObservationRole(), Content: obs})
	if err != nil {
		t.Fatal(err)
	}
	return k
}
