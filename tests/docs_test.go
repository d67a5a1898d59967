package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The repository's root, seen from this package's directory.
const repoRoot = ".."

// docFiles are the Markdown files whose links must resolve, relative to
// the repository's root: the top-level documents, docs/ at any depth and
// examples/.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "ARCHITECTURE.md", "RELIABILITY.md", "SECURITY.md", "BENCHMARKS.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range examples {
		rel, _ := filepath.Rel(repoRoot, p)
		files = append(files, filepath.ToSlash(rel))
	}
	sort.Strings(files)
	return files
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// prose is a Markdown file's text with its fenced code blocks blanked and,
// with spans, its code spans turned into spaces, line numbers and offsets
// unchanged, so that what is left of a link is a link.
func prose(text string, spans bool) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			lines[i] = ""
		case spans:
			lines[i] = codeSpan.ReplaceAllStringFunc(line, func(c string) string { return strings.Repeat(" ", len(c)) })
		}
	}
	return strings.Join(lines, "\n")
}

var (
	codeSpan     = regexp.MustCompile("`[^`]*`")
	markdownLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	linkText     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	exampleFile  = regexp.MustCompile(`examples/([A-Za-z0-9_.-]+\.yaml)`)
)

// anchor is GitHub's anchor of a heading: its text lower-cased, every
// character but letters, digits, '-', '_' and spaces dropped, spaces
// turned into '-'.
func anchor(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of a Markdown file's headings, repeated ones
// numbered as GitHub numbers them (-1, -2, …).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose(text, false), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if title == "" || title[0] != ' ' {
			continue
		}
		a := anchor(strings.TrimSpace(title))
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// The documents stay short enough to read: the README an overview, the
// benchmarks the current figures only.
func TestDocsLength(t *testing.T) {
	for file, limit := range map[string]int{"README.md": 350, "BENCHMARKS.md": 500} {
		n := strings.Count(strings.TrimRight(readDoc(t, file), "\n"), "\n") + 1
		if n > limit {
			t.Errorf("%s has %d lines, more than %d", file, n, limit)
		}
	}
}

// Every relative link of the documentation names a file that exists, and
// where it names a heading (#anchor), a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	headings := map[string]map[string]bool{}
	checked := 0
	for _, file := range docFiles(t) {
		text := prose(readDoc(t, file), true)
		for _, m := range markdownLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			where := file + ":" + strconv.Itoa(1+strings.Count(text[:m[0]], "\n"))
			path, frag, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
			}
			info, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(resolved)))
			if err != nil {
				t.Errorf("%s: link %s: no file %s", where, target, resolved)
				continue
			}
			if frag == "" || info.IsDir() || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if headings[resolved] == nil {
				headings[resolved] = anchors(readDoc(t, resolved))
			}
			if !headings[resolved][frag] {
				t.Errorf("%s: link %s: %s has no heading #%s", where, target, resolved, frag)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d links found: the link pattern no longer matches the documents", checked)
	}
}

// Every example configuration the documentation names exists. An
// experiment note may name one that examples/ no longer holds when it
// says which commit has it (`git show <commit>:examples/<name>.yaml`).
func TestDocsExamplesExist(t *testing.T) {
	for _, file := range docFiles(t) {
		text := readDoc(t, file)
		note := strings.HasPrefix(file, "docs/experiments/")
		for i, line := range strings.Split(text, "\n") {
			for _, m := range exampleFile.FindAllStringSubmatch(line, -1) {
				if _, err := os.Stat(filepath.Join(repoRoot, "examples", m[1])); err == nil {
					continue
				}
				atCommit := regexp.MustCompile(`[0-9a-f]{7,40}:examples/` + regexp.QuoteMeta(m[1]))
				if note && atCommit.MatchString(text) {
					continue
				}
				t.Errorf("%s:%d: names examples/%s, which does not exist", file, i+1, m[1])
			}
		}
	}
}

// Every experiment note is listed in the notes' index.
func TestDocsExperimentsIndexed(t *testing.T) {
	index := readDoc(t, "docs/experiments/README.md")
	notes, err := filepath.Glob(filepath.Join(repoRoot, "docs", "experiments", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range notes {
		name := filepath.Base(p)
		if name != "README.md" && !strings.Contains(index, "]("+name+")") {
			t.Errorf("docs/experiments/%s is not in docs/experiments/README.md's index", name)
		}
	}
}
