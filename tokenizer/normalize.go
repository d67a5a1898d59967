package tokenizer

import (
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/rangetable"
)

// The Rust library normalises with the unicode-normalization-alignments
// crate, whose tables are Unicode 9.0: a combining mark added later is a
// starter to it (class 0, no decomposition, no composition), so it is
// neither reordered nor composed. The reference corpus holds every mark
// and shows it. NFC here is therefore NFC over Unicode 9.0, built from
// x/text's (newer) data restricted to the characters 9.0 assigned; the
// normalisation stability policy makes the two agree on those.
const normVersion = "9.0.0"

var normAssigned = rangetable.Assigned(normVersion)

// nfc is s in NFC as the Rust library writes it.
func nfc(s string) string {
	// What x/text's newer NFC leaves as it is, 9.0's does too: characters
	// unknown to 9.0 only split segments and block compositions.
	// QuickSpan ends at a segment boundary, so what precedes it stays and
	// only the segments up to the next boundary need the work.
	n := norm.NFC.QuickSpanString(s)
	if n == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		b.WriteString(s[:n])
		s = s[n:]
		m := nextBoundary(s)
		d := decompose(s[:m])
		reorder(d)
		b.Write(compose(d))
		if s = s[m:]; s == "" {
			return b.String()
		}
		if n = norm.NFC.QuickSpanString(s); n == len(s) {
			b.WriteString(s)
			return b.String()
		}
	}
}

// nextBoundary is the offset of the first segment boundary in s after its
// first character (len(s) when there is none).
func nextBoundary(s string) int {
	_, i := utf8.DecodeRuneInString(s)
	for i < len(s) {
		p := norm.NFC.PropertiesString(s[i:])
		if p.BoundaryBefore() {
			return i
		}
		i += max(p.Size(), 1)
	}
	return len(s)
}

type nfcRune struct {
	r   rune
	ccc uint8
}

func cccOf(r rune) uint8 {
	if r < 0x300 || !unicode.Is(normAssigned, r) {
		return 0
	}
	return norm.NFD.PropertiesString(string(r)).CCC()
}

const (
	hangulBase  = 0xac00
	hangulL     = 0x1100
	hangulV     = 0x1161
	hangulT     = 0x11a7
	hangulLN    = 19
	hangulVN    = 21
	hangulTN    = 28
	hangulNN    = hangulVN * hangulTN
	hangulCount = hangulLN * hangulNN
)

func decompose(s string) []nfcRune {
	out := make([]nfcRune, 0, len(s))
	for _, r := range s {
		if r >= hangulBase && r < hangulBase+hangulCount {
			i := r - hangulBase
			out = append(out, nfcRune{hangulL + i/hangulNN, 0}, nfcRune{hangulV + i%hangulNN/hangulTN, 0})
			if t := i % hangulTN; t != 0 {
				out = append(out, nfcRune{hangulT + t, 0})
			}
			continue
		}
		if r >= 0xc0 && unicode.Is(normAssigned, r) {
			if dec := norm.NFD.PropertiesString(string(r)).Decomposition(); dec != nil {
				for _, x := range string(dec) {
					out = append(out, nfcRune{x, cccOf(x)})
				}
				continue
			}
		}
		out = append(out, nfcRune{r, cccOf(r)})
	}
	return out
}

// reorder sorts each run of non-starters by combining class, stably.
func reorder(d []nfcRune) {
	for i := 0; i < len(d); {
		if d[i].ccc == 0 {
			i++
			continue
		}
		j := i
		for j < len(d) && d[j].ccc != 0 {
			j++
		}
		run := d[i:j]
		sort.SliceStable(run, func(a, b int) bool { return run[a].ccc < run[b].ccc })
		i = j
	}
}

// compositions maps a (starter, combining) pair to its primary composite,
// for the characters Unicode 9.0 assigned.
var compositions = sync.OnceValue(func() map[[2]rune]rune {
	m := map[[2]rune]rune{}
	for _, rng := range [][2]rune{{0xc0, 0x2ffff}} {
		for c := rng[0]; c <= rng[1]; c++ {
			if c >= hangulBase && c < hangulBase+hangulCount || !unicode.Is(normAssigned, c) {
				continue
			}
			s := string(c)
			if !norm.NFC.IsNormalString(s) {
				continue // excluded from composition, or a singleton
			}
			dec := []rune(norm.NFD.String(s))
			if len(dec) < 2 {
				continue
			}
			last := dec[len(dec)-1]
			first := []rune(norm.NFC.String(string(dec[:len(dec)-1])))
			if len(first) != 1 || !unicode.Is(normAssigned, first[0]) || !unicode.Is(normAssigned, last) {
				continue
			}
			if norm.NFC.String(string(first[0])+string(last)) == s {
				m[[2]rune{first[0], last}] = c
			}
		}
	}
	return m
})

func compose(d []nfcRune) []byte {
	out := make([]byte, 0, len(d)*3)
	comp := compositions()
	starter := -1 // index in d of the last starter, which may absorb what follows
	w := 0
	var lastCCC int = -1
	for _, x := range d {
		if starter >= 0 {
			s := d[starter].r
			blocked := lastCCC != -1 && (lastCCC == 0 || lastCCC >= int(x.ccc))
			if !blocked {
				if li := s - hangulL; x.ccc == 0 && li >= 0 && li < hangulLN && x.r >= hangulV && x.r < hangulV+hangulVN && w == starter+1 {
					d[starter].r = hangulBase + (li*hangulVN+x.r-hangulV)*hangulTN
					continue
				}
				if si := s - hangulBase; x.ccc == 0 && si >= 0 && si < hangulCount && si%hangulTN == 0 && x.r > hangulT && x.r < hangulT+hangulTN && w == starter+1 {
					d[starter].r = s + x.r - hangulT
					continue
				}
				if c, ok := comp[[2]rune{s, x.r}]; ok {
					d[starter].r = c
					continue
				}
			}
		}
		if x.ccc == 0 {
			starter = w
			lastCCC = -1
		} else {
			lastCCC = int(x.ccc)
		}
		d[w] = x
		w++
	}
	for _, x := range d[:w] {
		out = utf8.AppendRune(out, x.r)
	}
	return out
}
