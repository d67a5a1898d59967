package taskgen

import (
	"fmt"
	"strings"
)

// The basic library: one-command tasks whose instruction carries every
// parameter the command needs (a word, a file name, a directory), so a
// small policy that learns to read the instruction solves tasks it has
// never seen, and each step checks two or three things, so partial credit
// exists. It is the default library of the reference pipeline, sized for
// the reference model (ARCHITECTURE.md §1: the recipe at CPU scale).
//
// Words and file stems are single tokens of the reference tokenizer
// (moe.DefaultTokenizer), words with their leading space and stems
// without, so the instruction and the command spell a value with the same
// token: copying it is one attention step, not a span.
var (
	basicWords = []string{"branch", "build", "check", "code", "colour", "command", "commit", "count",
		"directory", "docs", "feature", "file", "git", "grep", "line", "lines", "logs", "port", "read",
		"server", "src", "tests"}
	basicStems = []string{"app", "cat", "csv", "data", "exit", "line", "log", "logs", "out", "parser",
		"tar", "test", "total", "var"}
)

// Word is what the basic library's word source produces: a value the next
// step writes, held by no file.
const Word Kind = "word"

func init() {
	both := []Library{Basic, BasicRename}
	registerIn(&step{name: "basic.word", cat: CatFiles, apply: basicWord}, both...)
	registerIn(&step{name: "basic.file", cat: CatFiles, apply: basicFile}, both...)
	registerIn(&step{name: "basic.write", cat: CatFiles, consumes: []Kind{Word}, apply: basicWrite}, both...)
	registerIn(&step{name: "basic.append", cat: CatText, consumes: []Kind{Text}, apply: basicAppend, envOnly: true}, both...)
	registerIn(&step{name: "basic.copy", cat: CatFiles, consumes: []Kind{Text}, apply: basicCopy}, both...)
	registerIn(&step{name: "basic.move", cat: CatFiles, consumes: []Kind{Text}, apply: basicMove, envOnly: true}, Basic)
	registerIn(&step{name: "basic.rename", cat: CatFiles, consumes: []Kind{Text}, apply: basicRename, envOnly: true}, BasicRename)
}

// basicPath is a fresh /app/<stem>.txt.
func basicPath(g *Gen) string {
	for {
		p := "/app/" + Pick(g, basicStems) + ".txt"
		if !g.taken[p] {
			g.taken[p] = true
			return p
		}
	}
}

func basicWord(g *Gen, _ *Artifact) Contribution {
	return Contribution{Produces: []*Artifact{{Kind: Word, Data: []byte(Pick(g, basicWords))}}}
}

func basicFile(g *Gen, _ *Artifact) Contribution {
	p := basicPath(g)
	data := []byte(Pick(g, basicWords) + "\n")
	return Contribution{
		Env:      []File{{Path: p, Data: data}},
		Produces: []*Artifact{{Path: p, Kind: Text, Data: data, FromEnv: true}},
	}
}

func basicWrite(g *Gen, in *Artifact) Contribution {
	w := string(in.Data)
	p := basicPath(g)
	return Contribution{
		Solution: []string{fmt.Sprintf("echo %s > %s", w, p)},
		Checks: []Check{
			{Name: "exists", Paths: []string{p}, Body: []string{fmt.Sprintf("assert Path(%s).is_file(), %s", quote(p), quote(p+" is missing"))}},
			{Name: "holds_word", Paths: []string{p}, Body: []string{fmt.Sprintf("assert Path(%s).read_text().strip() == %s", quote(p), quote(w))}},
		},
		Phrase:   fmt.Sprintf("Write the word %s to the file %s.", w, p),
		Produces: []*Artifact{{Path: p, Kind: Text, Data: []byte(w + "\n")}},
	}
}

func basicAppend(g *Gen, in *Artifact) Contribution {
	w := Pick(g, basicWords)
	lines := append(in.Lines(), w)
	data := []byte(strings.Join(lines, "\n") + "\n")
	return Contribution{
		Solution: []string{fmt.Sprintf("echo %s >> %s", w, in.Path)},
		Checks: []Check{
			{Name: "last_line", Paths: []string{in.Path}, Body: []string{fmt.Sprintf("assert read_lines(%s)[-1:] == [%s]", quote(in.Path), quote(w))}},
			{Name: "kept_lines", Paths: []string{in.Path}, Body: []string{fmt.Sprintf("assert read_lines(%s) == %s", quote(in.Path), pyList(lines))}},
		},
		Phrase:   fmt.Sprintf("Append the word %s as a new line to the file %s.", w, in.Path),
		Produces: []*Artifact{{Path: in.Path, Kind: Text, Data: data}},
		Replaces: true,
	}
}

func basicCopy(g *Gen, in *Artifact) Contribution {
	p := basicPath(g)
	return Contribution{
		Solution: []string{fmt.Sprintf("cp %s %s", in.Path, p)},
		Checks: []Check{
			{Name: "copied", Paths: []string{p}, Body: []string{fmt.Sprintf("assert Path(%s).is_file(), %s", quote(p), quote(p+" is missing"))}},
			{Name: "same_bytes", Paths: []string{p}, Body: []string{fmt.Sprintf("assert Path(%s).read_bytes() == %s", quote(p), pyBytes(in.Data))}},
		},
		Phrase:   fmt.Sprintf("Copy the file %s to %s.", in.Path, p),
		Produces: []*Artifact{{Path: p, Kind: Text, Data: in.Data}},
	}
}

func basicMove(g *Gen, in *Artifact) Contribution {
	dir := "/app/" + Pick(g, basicStems)
	for g.taken[dir] {
		dir = "/app/" + Pick(g, basicStems)
	}
	g.taken[dir] = true
	p := dir + "/" + in.Name()
	g.taken[p] = true
	return Contribution{
		Solution: []string{fmt.Sprintf("mkdir -p %s && mv %s %s/", dir, in.Path, dir)},
		Checks: []Check{
			{Name: "moved", Paths: []string{p}, Body: []string{fmt.Sprintf("assert Path(%s).read_bytes() == %s", quote(p), pyBytes(in.Data))}},
			{Name: "source_gone", Paths: []string{in.Path}, Body: []string{fmt.Sprintf("assert not Path(%s).exists(), %s", quote(in.Path), quote(in.Path+" is still there"))}},
		},
		Phrase:   fmt.Sprintf("Make the directory %s and move the file %s to %s.", dir, in.Path, p),
		Produces: []*Artifact{{Path: p, Kind: Text, Data: in.Data}},
		Replaces: true,
	}
}

// basicRename is BasicRename's move: the file keeps its directory and
// takes a fresh name, so the command is the instruction's two paths.
func basicRename(g *Gen, in *Artifact) Contribution {
	p := basicPath(g)
	return Contribution{
		Solution: []string{fmt.Sprintf("mv %s %s", in.Path, p)},
		Checks: []Check{
			{Name: "moved", Paths: []string{p}, Body: []string{fmt.Sprintf("assert Path(%s).read_bytes() == %s", quote(p), pyBytes(in.Data))}},
			{Name: "source_gone", Paths: []string{in.Path}, Body: []string{fmt.Sprintf("assert not Path(%s).exists(), %s", quote(in.Path), quote(in.Path+" is still there"))}},
		},
		Phrase:   fmt.Sprintf("Move the file %s to %s.", in.Path, p),
		Produces: []*Artifact{{Path: p, Kind: Text, Data: in.Data}},
		Replaces: true,
	}
}

// pyBytes renders b as a Python bytes literal (printable ASCII and \n).
func pyBytes(b []byte) string {
	return "b" + quote(string(b))
}
