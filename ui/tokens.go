package ui

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
)

// Colourings of the token view.
const (
	ColourLogProb   = "logprob"
	ColourAdvantage = "advantage"
	ColourGap       = "gap"
)

// gapScale is the gap, in nats, that the gap colouring shows at full
// depth: a token's log-prob under the trainer that far from the
// sampler's is a large disagreement.
const gapScale = 1.0

// tok is one token of the token view.
type tok struct {
	Index int
	Text  string
	// Sampled tokens are the policy's (loss_mask); the others came from
	// the prompt or the terminal.
	Sampled bool
	Style   template.CSS
	Title   string
	// Mark, when set, is a boundary shown before the token: a turn, a
	// chunk, a TITO repair.
	Mark   string
	Repair bool
}

type chunkInfo struct {
	Chunk, Start, Tokens                     int
	DriftRepair                              string
	StrictPrefix, ClippedNorm, TextRetokened int
	Advantages                               bool
}

type tokenView struct {
	Ref         attemptRef
	Colour      string
	Total       int
	Page, Pages int
	First       int
	Chunks      []chunkInfo
	Tokens      []tok
	Tok         section[tokenRow]
	Values      section[valueRow]
	// MaxAdv is the largest |advantage| of the attempt, the scale of the
	// advantage colouring.
	MaxAdv float64
	// CanGap says whether the trainer's view can be had; GapErr is why
	// it could not.
	CanGap bool
	GapErr string
	// MaxGap is the largest |gap| among the page's sampled tokens.
	MaxGap float64
}

// PageLink is the query string of token page p in the same colouring.
func (v *tokenView) PageLink(p int) template.URL {
	return template.URL(fmt.Sprintf("%s&colour=%s&tpage=%d", v.Ref.Query(), v.Colour, p))
}

// ColourLink is the query string of this page in colouring c.
func (v *tokenView) ColourLink(c string) template.URL {
	return template.URL(fmt.Sprintf("%s&colour=%s&tpage=%d", v.Ref.Query(), c, v.Page))
}

// tokenView is page page (1-based) of the attempt's tokens, every chunk
// one after the other, coloured by colour.
func (s *Server) tokenView(ctx context.Context, run string, ref attemptRef, colour string, page int) *tokenView {
	if colour != ColourAdvantage && (colour != ColourGap || s.Rescorer == nil) {
		colour = ColourLogProb
	}
	v := &tokenView{Ref: ref, Colour: colour, Page: max(page, 1), CanGap: s.Rescorer != nil,
		Tok:    read[tokenRow](ctx, s.Store, schemas.TokensTable, ref.of(run, false, tokenCols)),
		Values: read[valueRow](ctx, s.Store, schemas.ValuesTable, ref.of(run, false, valueCols)),
	}
	adv := map[int][]float32{}
	for _, r := range v.Values.Rows {
		adv[r.Chunk] = r.Advantages
		for _, a := range r.Advantages {
			v.MaxAdv = max(v.MaxAdv, math.Abs(float64(a)))
		}
	}
	for _, c := range v.Tok.Rows {
		v.Chunks = append(v.Chunks, chunkInfo{Chunk: c.Chunk, Start: v.Total, Tokens: len(c.TokenIDs), DriftRepair: c.DriftRepair,
			StrictPrefix: c.StrictPrefix, ClippedNorm: c.ClippedNorm, TextRetokened: c.TextRetokened, Advantages: adv[c.Chunk] != nil})
		v.Total += len(c.TokenIDs)
	}
	v.Pages = max(1, (v.Total+TokensPerPage-1)/TokensPerPage)
	v.Page = min(v.Page, v.Pages)
	v.First = (v.Page - 1) * TokensPerPage
	last := min(v.First+TokensPerPage, v.Total)
	firstTurn := 0 // turns are numbered across the attempt, chunk after chunk
	for ci, c := range v.Tok.Rows {
		start := v.Chunks[ci].Start
		turns := map[int]int{}
		for t, off := range c.TurnOffsets {
			turns[int(off)] = firstTurn + t
		}
		firstTurn += len(c.TurnOffsets)
		if start >= last || start+len(c.TokenIDs) <= v.First {
			continue
		}
		var trainer []float32
		if colour == ColourGap && v.GapErr == "" {
			trainer = s.trainerLogProbs(ctx, run, ref, c, v)
		}
		for i := max(0, v.First-start); i < len(c.TokenIDs) && start+i < last; i++ {
			t := tok{Index: start + i, Text: s.piece(c.TokenIDs[i]), Sampled: i < len(c.LossMask) && c.LossMask[i]}
			var marks []string
			if i == 0 {
				marks = append(marks, fmt.Sprintf("chunk %d", c.Chunk))
				if c.DriftRepair != "" && c.DriftRepair != "none" {
					marks = append(marks, "TITO repair: "+c.DriftRepair)
					t.Repair = true
				}
			}
			if n, ok := turns[i]; ok {
				marks = append(marks, fmt.Sprintf("turn %d", n))
			}
			t.Mark = strings.Join(marks, " · ")
			title := fmt.Sprintf("#%d id %d", start+i, c.TokenIDs[i])
			var lp, a float64
			hasA := false
			if i < len(c.LogProbs) {
				lp = float64(c.LogProbs[i])
			}
			if as := adv[c.Chunk]; i < len(as) {
				a, hasA = float64(as[i]), true
			}
			if t.Sampled {
				title += fmt.Sprintf(" · log-prob %.4f (p %.3f)", lp, math.Exp(lp))
				if hasA {
					title += fmt.Sprintf(" · advantage %.4f", a)
				}
				if i < len(trainer) {
					g := float64(trainer[i]) - lp
					v.MaxGap = max(v.MaxGap, math.Abs(g))
					title += fmt.Sprintf(" · trainer log-prob %.4f (gap %+.4f)", trainer[i], g)
					if colour == ColourGap {
						t.Style = gapColour(g)
					}
				}
				switch {
				case colour == ColourGap:
				case colour == ColourLogProb:
					t.Style = probColour(math.Exp(lp))
				case hasA:
					t.Style = advColour(a, v.MaxAdv)
				}
			}
			t.Title = title
			v.Tokens = append(v.Tokens, t)
		}
	}
	return v
}

// piece is the text of a token as the view shows it: its bytes where
// they are UTF-8, else escaped, with line ends kept visible.
func (s *Server) piece(id int32) string {
	if s.Tokenizer == nil {
		return fmt.Sprintf("⟨%d⟩", id)
	}
	b, err := s.Tokenizer.Decode([]int{int(id)})
	if err != nil {
		return fmt.Sprintf("⟨%d?⟩", id)
	}
	if !utf8.ValidString(b) {
		q := strconv.Quote(b)
		return q[1 : len(q)-1]
	}
	return strings.ReplaceAll(b, "\n", "↵\n")
}

// probColour runs from red (the sampler thought the token unlikely) to
// green (it was all but sure).
func probColour(p float64) template.CSS {
	p = min(max(p, 0), 1)
	return template.CSS(fmt.Sprintf("background:hsl(%d,75%%,78%%)", int(math.Round(120*p))))
}

// advColour is green for a token the update pushed up, red for one it
// pushed down, the deeper the larger |a| against the attempt's largest.
func advColour(a, scale float64) template.CSS {
	if scale == 0 {
		return "background:hsl(0,0%,92%)"
	}
	x := min(math.Abs(a)/scale, 1)
	hue := 120
	if a < 0 {
		hue = 0
	}
	return template.CSS(fmt.Sprintf("background:hsl(%d,70%%,%d%%)", hue, int(math.Round(95-40*x))))
}

// gapColour is blue where the trainer gives the token more probability
// than the sampler did, orange where less, the deeper the larger the gap
// (full at gapScale).
func gapColour(g float64) template.CSS {
	x := min(math.Abs(g)/gapScale, 1)
	hue := 210
	if g < 0 {
		hue = 30
	}
	return template.CSS(fmt.Sprintf("background:hsl(%d,80%%,%d%%)", hue, int(math.Round(95-45*x))))
}

// trainerLogProbs is the trainer's log-prob of each token of chunk c,
// with the sampler's routing replayed; nil, with v.GapErr set, when it
// cannot be had.
func (s *Server) trainerLogProbs(ctx context.Context, run string, ref attemptRef, c tokenRow, v *tokenView) []float32 {
	rts := read[routingRow](ctx, s.Store, schemas.RoutingTable, ref.of(run, false, routingCols))
	ch := Chunk{IDs: c.TokenIDs, Temperature: c.Temperature}
	for _, r := range rts.Rows {
		if r.Chunk == c.Chunk {
			rec, err := routing.Decode(r.Record)
			if err != nil {
				v.GapErr = fmt.Sprintf("chunk %d's routing: %v", c.Chunk, err)
				return nil
			}
			ch.Routing = rec
		}
	}
	got, err := s.Rescorer.Rescore(ctx, run, ref.Version, ch)
	if err != nil {
		v.GapErr = err.Error()
		return nil
	}
	return got.LogProbs
}

type layerLoad struct {
	Layer int
	// Share is how often each expert was among the layer's top-k, of the
	// attempt's tokens.
	Share []float64
	Top   int
}

type routingBody struct {
	Ref     attemptRef
	Rows    section[routingRow]
	Err     string
	Tokens  int
	Layers  int
	TopK    int
	Experts int
	Load    []layerLoad
	// Token is the selected token (attempt-wide index) and Picked its
	// experts per layer; LivePicked those the router would choose itself.
	Token      int
	Text       string
	Picked     [][]int
	LivePicked [][]int
	// Mismatch is, per layer, the share of the attempt's tokens whose
	// experts a replay-off update would choose otherwise than the sampler
	// did; nil without a Rescorer, MismatchErr why it failed.
	Mismatch    []mismatch
	MismatchErr string
}

type mismatch struct {
	Layer, Tokens, Differ int
}

// Rate is the share of tokens routed otherwise.
func (m mismatch) Rate() float64 { return float64(m.Differ) / float64(max(m.Tokens, 1)) }

// ExpertIDs are 0..Experts-1, the columns of the load table.
func (b *routingBody) ExpertIDs() []int {
	ids := make([]int, b.Experts)
	for i := range ids {
		ids[i] = i
	}
	return ids
}

// Heat is the background of a load cell: the share against an even
// spread (k of E experts per token).
func (b *routingBody) Heat(share float64) template.CSS {
	even := float64(b.TopK) / float64(max(b.Experts, 1))
	x := min(share/(2*even), 1)
	return template.CSS(fmt.Sprintf("background:hsl(220,70%%,%d%%)", int(math.Round(97-50*x))))
}

func (s *Server) routingData(ctx context.Context, run string, ref attemptRef, token int) *routingBody {
	b := &routingBody{Ref: ref, Token: token,
		Rows: read[routingRow](ctx, s.Store, schemas.RoutingTable, ref.of(run, false, routingCols))}
	var counts [][]int
	start := 0
	for _, r := range b.Rows.Rows {
		rec, err := routing.Decode(r.Record)
		if err != nil {
			b.Err = fmt.Sprintf("chunk %d: %v", r.Chunk, err)
			return b
		}
		if counts == nil {
			b.Layers, b.TopK, b.Experts = rec.Layers, rec.TopK, rec.Experts
			counts = make([][]int, rec.Layers)
			for l := range counts {
				counts[l] = make([]int, rec.Experts)
			}
		}
		if rec.Layers != b.Layers || rec.Experts != b.Experts || rec.TopK != b.TopK {
			b.Err = fmt.Sprintf("chunk %d: routing of %d layers × top-%d of %d experts, not the %d × top-%d of %d before it",
				r.Chunk, rec.Layers, rec.TopK, rec.Experts, b.Layers, b.TopK, b.Experts)
			return b
		}
		for t := range rec.Tokens {
			for l := range rec.Layers {
				for j := range rec.TopK {
					counts[l][rec.At(t, l, j)]++
				}
			}
		}
		if token >= start && token < start+rec.Tokens {
			for l := range rec.Layers {
				var ids []int
				for j := range rec.TopK {
					ids = append(ids, rec.At(token-start, l, j))
				}
				b.Picked = append(b.Picked, ids)
			}
		}
		start += rec.Tokens
	}
	b.Tokens = start
	for l, c := range counts {
		ll := layerLoad{Layer: l, Share: make([]float64, len(c))}
		for e, n := range c {
			ll.Share[e] = float64(n) / float64(max(start, 1))
			if n > c[ll.Top] {
				ll.Top = e
			}
		}
		b.Load = append(b.Load, ll)
	}
	return b
}

func (s *Server) routing(w http.ResponseWriter, r *http.Request, l report.RunLine) {
	ref, err := parseAttempt(r.URL.Query().Get)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	token, _ := strconv.Atoi(r.URL.Query().Get("token"))
	b := s.routingData(r.Context(), l.Run, ref, max(token, 0))
	ids := read[tokenRow](r.Context(), s.Store, schemas.TokensTable, ref.of(l.Run, false, []string{"chunk", "token_ids", "temperature"}))
	if s.Rescorer != nil && b.Err == "" && len(b.Load) > 0 {
		s.replayOff(r.Context(), l.Run, ref, b, ids.Rows)
	}
	at := b.Token
	for _, c := range ids.Rows {
		if at < len(c.TokenIDs) {
			b.Text = s.piece(c.TokenIDs[at])
			break
		}
		at -= len(c.TokenIDs)
	}
	code := http.StatusOK
	if len(b.Rows.Rows) == 0 && !b.Rows.Bad() {
		code = http.StatusNotFound
		b.Err = fmt.Sprintf("run %s stored no routing for attempt %s", l.Run, ref)
	}
	s.render(w, code, "routing", (&view{Title: ref.Task + " #" + strconv.Itoa(ref.Attempt) + " · routing", Nav: "attempts", Body: b}).live(l))
}

// replayOff fills b.Mismatch: the attempt's chunks scored with the
// router choosing, against the sampler's routing, layer by layer, over
// the tokens the sampler's record covers (all but a chunk's last).
func (s *Server) replayOff(ctx context.Context, run string, ref attemptRef, b *routingBody, chunks []tokenRow) {
	b.Mismatch = make([]mismatch, b.Layers)
	for l := range b.Mismatch {
		b.Mismatch[l].Layer = l
	}
	byChunk := map[int]tokenRow{}
	for _, c := range chunks {
		byChunk[c.Chunk] = c
	}
	start := 0
	for _, r := range b.Rows.Rows {
		rec, err := routing.Decode(r.Record)
		if err != nil {
			b.MismatchErr = fmt.Sprintf("chunk %d: %v", r.Chunk, err)
			return
		}
		c, ok := byChunk[r.Chunk]
		if !ok {
			b.MismatchErr = fmt.Sprintf("chunk %d has routing but no tokens row", r.Chunk)
			return
		}
		got, err := s.Rescorer.Rescore(ctx, run, ref.Version, Chunk{IDs: c.TokenIDs, Temperature: c.Temperature})
		if err != nil {
			b.MismatchErr = err.Error()
			return
		}
		n := min(rec.Tokens, got.Live.Tokens, len(c.TokenIDs)-1)
		for t := range n {
			for l := range rec.Layers {
				b.Mismatch[l].Tokens++
				for j := range rec.TopK {
					if rec.At(t, l, j) != got.Live.At(t, l, j) {
						b.Mismatch[l].Differ++
						break
					}
				}
			}
		}
		if at := b.Token - start; at >= 0 && at < got.Live.Tokens {
			for l := range got.Live.Layers {
				var ids []int
				for j := range got.Live.TopK {
					ids = append(ids, got.Live.At(at, l, j))
				}
				b.LivePicked = append(b.LivePicked, ids)
			}
		}
		start += rec.Tokens
	}
}
