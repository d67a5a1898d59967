package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// matcher finds added tokens leftmost-longest, as the Rust library's
// Aho-Corasick automaton (MatchKind::LeftmostLongest) does.
type matcher struct {
	first [256]bool
	byLen []string // longest first
}

func newMatcher(tokens []string) *matcher {
	m := &matcher{byLen: append([]string(nil), tokens...)}
	sort.SliceStable(m.byLen, func(i, j int) bool { return len(m.byLen[i]) > len(m.byLen[j]) })
	for _, t := range tokens {
		m.first[t[0]] = true
	}
	return m
}

// split calls f with the pieces of s in order: each added token found
// (added true) and the text between them (never empty).
func (m *matcher) split(s string, f func(piece string, added bool)) {
	if len(m.byLen) == 0 {
		if s != "" {
			f(s, false)
		}
		return
	}
	start := 0
	for i := 0; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		for _, t := range m.byLen {
			if strings.HasPrefix(s[i:], t) {
				if i > start {
					f(s[start:i], false)
				}
				f(t, true)
				start = i + len(t)
				i = start - 1
				break
			}
		}
	}
	if start < len(s) {
		f(s[start:], false)
	}
}

// pattern is one of the pre-tokenizer regexes, each with a hand-written
// scanner that follows Oniguruma's leftmost-first alternation and
// backtracking exactly.
type pattern int

const (
	// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
	patternGPT2 pattern = iota + 1
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	patternQwen2
	// the same with \p{N}{1,3}
	patternCL100K
	// t1's byte classes (ByteClassPattern)
	patternByteClass
)

// Character classes, as Oniguruma has them (onig_tables.go).
const (
	clsOther  = iota // [^\s\p{L}\p{N}]
	clsLetter        // \p{L}
	clsNumber        // \p{N}
	clsSpace         // \s (Unicode White_Space)
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range t {
		t[r] = classOf(rune(r))
	}
	return t
}()

func classOf(r rune) uint8 {
	switch {
	case unicode.Is(onigLetter, r):
		return clsLetter
	case unicode.Is(onigNumber, r):
		return clsNumber
	case unicode.Is(onigSpace, r):
		return clsSpace
	}
	return clsOther
}

// at is the rune at s[i], its width and class; ok is false at the end.
func at(s string, i int) (r rune, w int, c uint8, ok bool) {
	if i >= len(s) {
		return 0, 0, 0, false
	}
	if b := s[i]; b < utf8.RuneSelf {
		return rune(b), 1, asciiClass[b], true
	}
	r, w = utf8.DecodeRuneInString(s[i:])
	return r, w, classOf(r), true
}

// run is the end of the run of class c starting at i.
func run(s string, i int, c uint8) int {
	for {
		_, w, ci, ok := at(s, i)
		if !ok || ci != c {
			return i
		}
		i += w
	}
}

func isCRLF(r rune) bool { return r == '\r' || r == '\n' }

// next is the end of the match that starts at i (< len(s)). Every
// character matches some alternative, so the pattern covers s.
func (p pattern) next(s string, i int) int {
	if p == patternByteClass {
		return byteClassNext(s, i)
	}
	r, w, c, _ := at(s, i)
	if r == '\'' {
		if j := p.contraction(s, i+1); j > 0 {
			return j
		}
	}
	if p == patternGPT2 {
		if r == ' ' {
			if _, _, c2, ok := at(s, i+1); ok && c2 != clsSpace {
				return run(s, i+1, c2)
			}
		}
		if c != clsSpace {
			return run(s, i, c)
		}
		return spaces(s, i, false)
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == clsLetter {
		return run(s, i, clsLetter)
	}
	if c != clsNumber && !isCRLF(r) {
		if _, _, c2, ok := at(s, i+w); ok && c2 == clsLetter {
			return run(s, i+w, clsLetter)
		}
	}
	// \p{N} or \p{N}{1,3}
	if c == clsNumber {
		j, most := i+w, 1
		if p == patternCL100K {
			most = 3
		}
		for k := 1; k < most; k++ {
			_, w2, c2, ok := at(s, j)
			if !ok || c2 != clsNumber {
				break
			}
			j += w2
		}
		return j
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	j := i
	if r == ' ' {
		if _, _, c2, ok := at(s, i+1); ok && c2 == clsOther {
			j = i + 1
		}
	}
	if _, _, cj, _ := at(s, j); cj == clsOther {
		j = run(s, j, clsOther)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	return spaces(s, i, true)
}

// spaces matches at a white-space character: \s*[\r\n]+ (when crlf), then
// \s+(?!\S), then \s+.
func spaces(s string, i int, crlf bool) int {
	end, lastCRLF, lastStart := i, -1, i
	for {
		r, w, c, ok := at(s, end)
		if !ok || c != clsSpace {
			break
		}
		if isCRLF(r) {
			lastCRLF = end
		}
		lastStart = end
		end += w
	}
	// \s* backtracks to the last line break of the run; [\r\n]+ then
	// takes just that one, since what follows it in the run is not one.
	if crlf && lastCRLF >= 0 {
		return lastCRLF + 1
	}
	// \s+(?!\S): the whole run at the end of the text, else all of it but
	// its last character, which must then precede the non-space.
	if end == len(s) || lastStart > i {
		if end == len(s) {
			return end
		}
		return lastStart
	}
	return end
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d after the apostrophe at
// j-1, case-insensitively except in GPT-2's pattern; it returns 0 when
// none does.
func (p pattern) contraction(s string, j int) int {
	letter := func(k int, want byte) int {
		r, w, _, ok := at(s, k)
		if !ok {
			return 0
		}
		if p == patternGPT2 {
			if r == rune(want) {
				return k + w
			}
			return 0
		}
		for _, f := range onigFold[want] {
			if r == f {
				return k + w
			}
		}
		return 0
	}
	for _, one := range []byte("stmd") {
		if k := letter(j, one); k > 0 {
			return k
		}
	}
	for _, two := range []string{"re", "ve", "ll"} {
		if k := letter(j, two[0]); k > 0 {
			if k2 := letter(k, two[1]); k2 > 0 {
				return k2
			}
		}
	}
	return 0
}

// ByteClassPattern is the Split regex of t1's own tokenizer (package moe):
// runs of letters (ASCII letters, '_' and every non-ASCII character),
// digits, punctuation, spaces or control characters, a single space
// joining the letter, digit or punctuation run after it, as in GPT-2.
// Its classes are ASCII ranges and their complement, so unlike \p{L} they
// do not depend on a Unicode version, and a character's UTF-8 bytes all
// fall in one class: cutting the bytes (as moe does) and cutting the
// characters (as the Rust library does) agree.
const ByteClassPattern = ` ?[^\x00-\x40\x5B-\x5E\x60\x7B-\x7F]+| ?[0-9]+| ?[\x21-\x2F\x3A-\x40\x5B-\x5E\x60\x7B-\x7E]+| +(?![^\x00-\x20\x7F])|[\x00-\x1F\x7F]+`

// Byte classes of ByteClassPattern.
const (
	bcLetter = iota
	bcDigit
	bcSpace
	bcControl
	bcPunct
)

func byteClass(b byte) int {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b == '_', b >= 0x80:
		return bcLetter
	case b >= '0' && b <= '9':
		return bcDigit
	case b == ' ':
		return bcSpace
	case b < 0x20 || b == 0x7f:
		return bcControl
	}
	return bcPunct
}

// byteClassNext matches ByteClassPattern at i. The alternatives are tried
// in order: " ?X+" takes one space before a non-space, non-control run;
// " +(?!…)" backtracks off the last space of a longer run so that space
// can join what follows.
func byteClassNext(s string, i int) int {
	c := byteClass(s[i])
	j := i
	if c == bcSpace && i+1 < len(s) {
		if c2 := byteClass(s[i+1]); c2 != bcSpace && c2 != bcControl {
			j, c = i+1, c2
		}
	}
	for j < len(s) && byteClass(s[j]) == c {
		j++
	}
	if c == bcSpace && j < len(s) && j-i > 1 && byteClass(s[j]) != bcControl {
		j--
	}
	return j
}
