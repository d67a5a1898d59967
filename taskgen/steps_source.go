package taskgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Sources put input files into the environment. They add nothing to the
// solution or the verifier; the step that consumes their artifact does.

var (
	components = []string{"auth", "db", "cache", "api", "queue", "scheduler", "billing", "search"}
	messages   = []string{"request handled", "connection reset", "retrying operation", "timeout exceeded",
		"user logged in", "cache miss", "disk usage high", "job finished", "invalid token", "rate limited"}
	regions  = []string{"north", "south", "east", "west", "central"}
	products = []string{"widget", "gadget", "bolt", "gear", "valve", "spring", "hinge"}
	people   = []string{"ada", "bea", "cal", "dev", "eli", "fay", "gus", "hal", "ivy", "jon",
		"kim", "lou", "max", "nia", "oli", "pat", "quinn", "rae", "sam", "tia", "uma", "vic"}
	teams = []string{"red", "blue", "green", "gold"}
	words = []string{"alpha", "bravo", "delta", "echo", "kilo", "lima", "oscar", "sierra", "tango", "zulu"}
)

func init() {
	register(&step{name: "source.log", cat: CatText, apply: sourceLog})
	register(&step{name: "source.csv", cat: CatData, apply: sourceCSV})
	register(&step{name: "source.json", cat: CatData, apply: sourceJSON})
	register(&step{name: "source.tree", cat: CatFiles, apply: sourceTree})
	register(&step{name: "source.broken", cat: CatDebugging, apply: sourceBroken})
}

func sourceLog(g *Gen, _ *Artifact) Contribution {
	path := g.Path("/app/data", Pick(g, []string{"app", "server", "worker", "gateway"}), ".log")
	comps := PickN(g, components, 4)
	n := g.Between(30, 70)
	var b strings.Builder
	for i := range n {
		level := "INFO"
		switch r := g.Intn(100); {
		case i == 1 || r < 15:
			level = "ERROR"
		case i == 2 || r < 40:
			level = "WARN"
		}
		fmt.Fprintf(&b, "2026-03-%02d %02d:%02d:%02d %s %s: %s\n", 1+i*28/n, g.Intn(24), g.Intn(60), g.Intn(60),
			level, Pick(g, comps), Pick(g, messages))
	}
	data := []byte(b.String())
	return Contribution{
		Env:      []File{{Path: path, Data: data}},
		Produces: []*Artifact{{Path: path, Kind: Text, Data: data}},
	}
}

func sourceCSV(g *Gen, _ *Artifact) Contribution {
	path := g.Path("/app/data", Pick(g, []string{"sales", "orders", "shipments", "inventory"}), ".csv")
	regs := PickN(g, regions, g.Between(3, 4))
	prods := PickN(g, products, g.Between(3, 5))
	header := []string{"id", "region", "product", "units", "price"}
	var rows [][]string
	for i := range g.Between(12, 30) {
		rows = append(rows, []string{strconv.Itoa(101 + i), Pick(g, regs), Pick(g, prods),
			strconv.Itoa(g.Between(1, 50)), strconv.Itoa(g.Between(2, 99))})
	}
	data := renderCSV(header, rows)
	return Contribution{
		Env: []File{{Path: path, Data: data}},
		Produces: []*Artifact{{Path: path, Kind: CSV, Data: data, Header: header, Rows: rows,
			Numeric: []string{"units", "price"}, Category: []string{"region", "product"}}},
	}
}

func sourceJSON(g *Gen, _ *Artifact) Contribution {
	path := g.Path("/app/data", Pick(g, []string{"staff", "players", "accounts", "members"}), ".json")
	n := g.Between(8, 18)
	names := PickN(g, people, n)
	tms := PickN(g, teams, 3)
	recs := make([]Record, n)
	for i, name := range names {
		recs[i] = Record{{"id", i + 1}, {"name", name}, {"team", Pick(g, tms)},
			{"score", g.Between(0, 100)}, {"active", g.Intn(3) > 0}}
	}
	data := renderJSON(recs)
	return Contribution{
		Env: []File{{Path: path, Data: data}},
		Produces: []*Artifact{{Path: path, Kind: JSON, Data: data, Records: recs, Key: "name",
			Numeric: []string{"score"}, Category: []string{"team"}}},
	}
}

func sourceTree(g *Gen, _ *Artifact) Contribution {
	root := g.Path("/app/data", Pick(g, []string{"docs", "project", "assets", "reports"}), "")
	exts := []string{".txt", ".md", ".log", ".conf"}
	subs := []string{"", "notes", "old", "misc"}
	var env, files []File
	for i, name := range PickN(g, words, g.Between(5, 9)) {
		rel := name + exts[(i+g.Intn(2))%len(exts)]
		if sub := Pick(g, subs); sub != "" {
			rel = sub + "/" + rel
		}
		var b strings.Builder
		for range g.Between(1, 4) {
			fmt.Fprintf(&b, "%s %s %d\n", name, Pick(g, messages), g.Intn(1000))
		}
		data := []byte(b.String())
		env = append(env, File{Path: root + "/" + rel, Data: data})
		files = append(files, File{Path: rel, Data: data, Source: root + "/" + rel})
	}
	sortFiles(files)
	return Contribution{Env: env, Produces: []*Artifact{{Path: root, Kind: Dir, Files: files}}}
}

// sourceBroken writes a script with one planted defect; the fix is a
// one-line change, and the script's intended output is known.
func sourceBroken(g *Gen, _ *Artifact) Contribution {
	path := g.Path("/app/bin", Pick(g, []string{"total", "tally", "summarize", "count"}), ".sh")
	nums := make([]string, g.Between(4, 8))
	limit := g.Between(20, 60)
	sum, above, below := 0, 0, 0
	// The defect must show: redraw until the inverted comparison counts
	// differently from the right one.
	for above == below {
		sum, above, below = 0, 0, 0
		for i := range nums {
			v := g.Between(1, 99)
			nums[i] = strconv.Itoa(v)
			sum += v
			if v > limit {
				above++
			}
			if v < limit {
				below++
			}
		}
	}
	var script, want string
	switch g.Intn(2) {
	case 0: // a misspelt accumulator leaves the total at zero
		script = fmt.Sprintf("#!/bin/bash\ntotal=0\nfor n in %s; do\n  totl=$((total + n))\ndone\necho \"total=$total\"\n",
			strings.Join(nums, " "))
		want = fmt.Sprintf("total=%d", sum)
	default: // an inverted comparison counts the wrong side
		script = fmt.Sprintf("#!/bin/bash\nlimit=%d\nabove=0\nfor n in %s; do\n  if [ \"$n\" -lt \"$limit\" ]; then\n    above=$((above + 1))\n  fi\ndone\necho \"above=$above\"\n",
			limit, strings.Join(nums, " "))
		want = fmt.Sprintf("above=%d", above)
	}
	data := []byte(script)
	return Contribution{
		Env:      []File{{Path: path, Data: data, Mode: 0o755}},
		Produces: []*Artifact{{Path: path, Kind: Broken, Data: data, Output: want}},
	}
}
