package taskgen

import (
	"fmt"
	"slices"
	"strings"
)

func init() {
	register(&step{name: "text.count", cat: CatText, consumes: []Kind{Text}, apply: textCount})
	register(&step{name: "text.filter", cat: CatText, consumes: []Kind{Text}, apply: textFilter})
	register(&step{name: "text.replace", cat: CatText, consumes: []Kind{Text}, apply: textReplace})
	register(&step{name: "text.uniq", cat: CatText, consumes: []Kind{Text}, apply: textUniq})
}

// token picks a word of the text that some but (when possible) not all
// lines contain, so counting and filtering have something to decide.
// Words are letters only, so they need no escaping in grep or sed.
func token(g *Gen, lines []string) string {
	seen := map[string]int{}
	for _, l := range lines {
		for _, w := range uniqueWords(l) {
			seen[w]++
		}
	}
	var some, all []string
	for _, w := range sortedKeys(seen) {
		if seen[w] < len(lines) {
			some = append(some, w)
		}
		all = append(all, w)
	}
	if len(some) > 0 {
		return Pick(g, some)
	}
	if len(all) > 0 {
		return Pick(g, all)
	}
	return ""
}

func uniqueWords(line string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(line, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) {
		if len(f) >= 3 && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

func matching(lines []string, tok string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, tok) {
			out = append(out, l)
		}
	}
	return out
}

func joinLines(ls []string) []byte {
	if len(ls) == 0 {
		return nil
	}
	return []byte(strings.Join(ls, "\n") + "\n")
}

// exactText asserts a file's content, forgiving only a missing final newline.
func exactText(path string, data []byte) []string {
	return []string{
		fmt.Sprintf("got = Path(%s).read_text()", quote(path)),
		fmt.Sprintf("assert got.rstrip(\"\\n\") == %s, %s", quote(strings.TrimRight(string(data), "\n")), quote("unexpected content in "+path)),
	}
}

func textCount(g *Gen, in *Artifact) Contribution {
	lines := in.Lines()
	tok := token(g, lines)
	n := len(matching(lines, tok))
	out := g.Path("/app/out", strings.ToLower(tok)+"_count", ".txt")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", fmt.Sprintf("grep -c -F -- %s %s > %s || true", sh(tok), sh(in.Path), sh(out))},
		Checks: []Check{{Name: "count", Paths: []string{out},
			Body: []string{fmt.Sprintf("assert Path(%s).read_text().strip() == %s", quote(out), quote(fmt.Sprint(n)))}}},
		Phrase: fmt.Sprintf("Count the lines of `%s` that contain `%s` (case-sensitive) and write the number alone to `%s`.",
			in.Path, tok, out),
		Produces: []*Artifact{{Path: out, Kind: Value, Data: fmt.Appendf(nil, "%d\n", n)}},
	}
}

func textFilter(g *Gen, in *Artifact) Contribution {
	lines := in.Lines()
	tok := token(g, lines)
	data := joinLines(matching(lines, tok))
	out := g.Path("/app/out", strings.ToLower(tok)+"_lines", ".txt")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", fmt.Sprintf("grep -F -- %s %s > %s || true", sh(tok), sh(in.Path), sh(out))},
		Checks:   []Check{{Name: "filtered", Paths: []string{out}, Body: exactText(out, data)}},
		Phrase: fmt.Sprintf("Write every line of `%s` that contains `%s` (case-sensitive), in their original order, to `%s`.",
			in.Path, tok, out),
		Produces: []*Artifact{{Path: out, Kind: Text, Data: data}},
	}
}

func textReplace(g *Gen, in *Artifact) Contribution {
	lines := in.Lines()
	tok := token(g, lines)
	with := strings.ToUpper(Pick(g, words))
	data := []byte(strings.ReplaceAll(string(in.Data), tok, with))
	out := g.Path("/app/out", in.Name()[:strings.IndexByte(in.Name()+".", '.')]+"_edited", ".txt")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", fmt.Sprintf("sed 's/%s/%s/g' %s > %s", tok, with, sh(in.Path), sh(out))},
		Checks:   []Check{{Name: "replaced", Paths: []string{out}, Body: exactText(out, data)}},
		Phrase: fmt.Sprintf("Write a copy of `%s` to `%s` in which every occurrence of `%s` is replaced by `%s`.",
			in.Path, out, tok, with),
		Produces: []*Artifact{{Path: out, Kind: Text, Data: data}},
	}
}

// textUniq lists the distinct values of one whitespace-separated field,
// choosing a field with a handful of values.
func textUniq(g *Gen, in *Artifact) Contribution {
	lines := in.Lines()
	minFields := 0
	for i, l := range lines {
		if n := len(strings.Fields(l)); i == 0 || n < minFields {
			minFields = n
		}
	}
	var good []int
	for k := 1; k <= minFields; k++ {
		if d := len(distinctField(lines, k)); d >= 2 && d <= 10 {
			good = append(good, k)
		}
	}
	k := 1
	if len(good) > 0 {
		k = Pick(g, good)
	}
	vals := distinctField(lines, k)
	data := joinLines(vals)
	out := g.Path("/app/out", fmt.Sprintf("field%d_values", k), ".txt")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", fmt.Sprintf("awk 'NF >= %d {print $%d}' %s | LC_ALL=C sort -u > %s", k, k, sh(in.Path), sh(out))},
		Checks:   []Check{{Name: "distinct", Paths: []string{out}, Body: exactText(out, data)}},
		Phrase: fmt.Sprintf("Write the distinct values of whitespace-separated field %d of `%s` (counting from 1; lines without that field are skipped) to `%s`, one per line, sorted in byte order.",
			k, in.Path, out),
		Produces: []*Artifact{{Path: out, Kind: Text, Data: data}},
	}
}

func distinctField(lines []string, k int) []string {
	seen := map[string]bool{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) >= k {
			seen[f[k-1]] = true
		}
	}
	return sortedKeys(seen)
}
