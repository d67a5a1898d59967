package taskgen

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func init() {
	register(&step{name: "csv.aggregate", cat: CatData, consumes: []Kind{CSV}, apply: csvAggregate})
	register(&step{name: "csv.filter", cat: CatData, consumes: []Kind{CSV}, apply: csvFilter})
	register(&step{name: "csv.sort", cat: CatData, consumes: []Kind{CSV}, apply: csvSort})
	register(&step{name: "csv.tojson", cat: CatData, consumes: []Kind{CSV}, apply: csvToJSON})
	register(&step{name: "json.select", cat: CatData, consumes: []Kind{JSON}, apply: jsonSelect})
	register(&step{name: "json.stats", cat: CatData, consumes: []Kind{JSON}, apply: jsonStats})
}

func col(header []string, name string) int { return slices.Index(header, name) }

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// csvRows asserts a CSV file's rows (header first), whatever its quoting or
// line endings.
func csvRows(path string, header []string, rows [][]string) []string {
	all := append([][]string{header}, rows...)
	lits := make([]string, len(all))
	for i, r := range all {
		lits[i] = pyList(r)
	}
	return []string{
		fmt.Sprintf("want = [%s]", strings.Join(lits, ", ")),
		fmt.Sprintf("assert read_csv(%s) == want, %s", quote(path), quote("unexpected rows in "+path)),
	}
}

func stem(a *Artifact) string {
	return strings.TrimSuffix(a.Name(), a.Name()[strings.IndexByte(a.Name()+".", '.'):])
}

func csvAggregate(g *Gen, in *Artifact) Contribution {
	by, val := Pick(g, in.Category), Pick(g, in.Numeric)
	bi, vi := col(in.Header, by), col(in.Header, val)
	sums := map[string]int{}
	for _, r := range in.Rows {
		sums[r[bi]] += atoi(r[vi])
	}
	header := []string{by, "total_" + val}
	var rows [][]string
	for _, k := range sortedKeys(sums) {
		rows = append(rows, []string{k, strconv.Itoa(sums[k])})
	}
	out := g.Path("/app/out", fmt.Sprintf("%s_by_%s", val, by), ".csv")
	return Contribution{
		Solution: []string{"mkdir -p /app/out",
			fmt.Sprintf("{ echo %s; awk -F, 'NR > 1 { s[$%d] += $%d } END { for (k in s) print k \",\" s[k] }' %s | LC_ALL=C sort; } > %s",
				sh(strings.Join(header, ",")), bi+1, vi+1, sh(in.Path), sh(out))},
		Checks: []Check{{Name: "aggregate", Paths: []string{out}, Body: csvRows(out, header, rows)}},
		Phrase: fmt.Sprintf("From `%s`, compute the sum of `%s` for each distinct `%s` and write `%s` as CSV with the header `%s,total_%s` and one row per `%s`, sorted by `%s` in byte order.",
			in.Path, val, by, out, by, val, by, by),
		Produces: []*Artifact{{Path: out, Kind: CSV, Data: renderCSV(header, rows), Header: header, Rows: rows,
			Numeric: []string{"total_" + val}, Category: []string{by}}},
	}
}

func csvFilter(g *Gen, in *Artifact) Contribution {
	val := Pick(g, in.Numeric)
	vi := col(in.Header, val)
	vals := make([]int, len(in.Rows))
	for i, r := range in.Rows {
		vals[i] = atoi(r[vi])
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	limit := 0
	if len(sorted) > 0 {
		limit = sorted[len(sorted)/2]
		if limit == sorted[len(sorted)-1] { // keep at least one row
			limit = sorted[0] - 1
		}
	}
	var rows [][]string
	for i, r := range in.Rows {
		if vals[i] > limit {
			rows = append(rows, r)
		}
	}
	out := g.Path("/app/out", fmt.Sprintf("%s_%s_over_%d", stem(in), val, limit), ".csv")
	return Contribution{
		Solution: []string{"mkdir -p /app/out",
			fmt.Sprintf("awk -F, 'NR == 1 || $%d > %d' %s > %s", vi+1, limit, sh(in.Path), sh(out))},
		Checks: []Check{{Name: "filtered_rows", Paths: []string{out}, Body: csvRows(out, in.Header, rows)}},
		Phrase: fmt.Sprintf("Write to `%s` the header and every row of `%s` whose `%s` is greater than %d, keeping the original row order.",
			out, in.Path, val, limit),
		Produces: []*Artifact{{Path: out, Kind: CSV, Data: renderCSV(in.Header, rows), Header: in.Header, Rows: rows,
			Numeric: in.Numeric, Category: in.Category}},
	}
}

func csvSort(g *Gen, in *Artifact) Contribution {
	val := Pick(g, in.Numeric)
	vi := col(in.Header, val)
	rows := slices.Clone(in.Rows)
	sort.SliceStable(rows, func(i, j int) bool { return atoi(rows[i][vi]) > atoi(rows[j][vi]) })
	out := g.Path("/app/out", fmt.Sprintf("%s_by_%s", stem(in), val), ".csv")
	return Contribution{
		Solution: []string{"mkdir -p /app/out",
			fmt.Sprintf("{ head -n 1 %s; tail -n +2 %s | LC_ALL=C sort -t, -s -k%d,%dnr; } > %s", sh(in.Path), sh(in.Path), vi+1, vi+1, sh(out))},
		Checks: []Check{{Name: "sorted_rows", Paths: []string{out}, Body: csvRows(out, in.Header, rows)}},
		Phrase: fmt.Sprintf("Write `%s` sorted by `%s` from largest to smallest to `%s`, header first; rows with equal `%s` keep their original order.",
			in.Path, val, out, val),
		Produces: []*Artifact{{Path: out, Kind: CSV, Data: renderCSV(in.Header, rows), Header: in.Header, Rows: rows,
			Numeric: in.Numeric, Category: in.Category}},
	}
}

func csvToJSON(g *Gen, in *Artifact) Contribution {
	ints := slices.Clone(in.Numeric)
	if col(in.Header, "id") >= 0 {
		ints = append(ints, "id")
	}
	var recs []Record
	for _, r := range in.Rows {
		var rec Record
		for i, h := range in.Header {
			if slices.Contains(ints, h) {
				rec = append(rec, Field{h, atoi(r[i])})
			} else {
				rec = append(rec, Field{h, r[i]})
			}
		}
		recs = append(recs, rec)
	}
	key := in.Header[0]
	out := g.Path("/app/out", stem(in), ".json")
	intList := slices.Clone(ints)
	slices.Sort(intList)
	return Contribution{
		Solution: []string{"mkdir -p /app/out", "python3 - <<'PY'", "import csv, json",
			fmt.Sprintf("rows = list(csv.DictReader(open(%s, newline='')))", quote(in.Path)),
			"for r in rows:",
			fmt.Sprintf("    for k in %s:", pyList(intList)),
			"        r[k] = int(r[k])",
			fmt.Sprintf("json.dump(rows, open(%s, 'w'), indent=2)", quote(out)),
			"PY"},
		Checks: []Check{{Name: "json_records", Paths: []string{out}, Body: []string{
			fmt.Sprintf("want = json.loads(%s)", quote(string(renderJSON(recs)))),
			fmt.Sprintf("assert json.loads(Path(%s).read_text()) == want", quote(out)),
		}}},
		Phrase: fmt.Sprintf("Convert `%s` to a JSON array of objects, one per data row in file order, keyed by the header names, with the columns %s as integers and the rest as strings; write it to `%s`.",
			in.Path, "`"+strings.Join(intList, "`, `")+"`", out),
		Produces: []*Artifact{{Path: out, Kind: JSON, Data: renderJSON(recs), Records: recs, Key: key,
			Numeric: in.Numeric, Category: in.Category}},
	}
}

// cmpValue orders JSON values the way Python orders them within one type.
func cmpValue(a, b any) int {
	switch a := a.(type) {
	case int:
		return cmp.Compare(a, b.(int))
	case string:
		return strings.Compare(a, b.(string))
	}
	return 0
}

func jsonSelect(g *Gen, in *Artifact) Contribution {
	val := Pick(g, in.Numeric)
	vals := make([]int, len(in.Records))
	for i, r := range in.Records {
		vals[i], _ = r.Get(val).(int)
	}
	sorted := slices.Clone(vals)
	slices.Sort(sorted)
	limit := 0
	if len(sorted) > 0 {
		limit = sorted[len(sorted)/3]
	}
	var sel []Record
	for i, r := range in.Records {
		if vals[i] >= limit {
			sel = append(sel, r)
		}
	}
	sort.SliceStable(sel, func(i, j int) bool {
		vi, vj := sel[i].Get(val).(int), sel[j].Get(val).(int)
		if vi != vj {
			return vi > vj
		}
		return cmpValue(sel[i].Get(in.Key), sel[j].Get(in.Key)) < 0
	})
	lines := make([]string, len(sel))
	for i, r := range sel {
		lines[i] = fmt.Sprint(r.Get(in.Key))
	}
	data := joinLines(lines)
	out := g.Path("/app/out", fmt.Sprintf("top_%s", val), ".txt")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", "python3 - <<'PY'", "import json",
			fmt.Sprintf("recs = json.load(open(%s))", quote(in.Path)),
			fmt.Sprintf("sel = [r for r in recs if r[%s] >= %d]", quote(val), limit),
			fmt.Sprintf("sel.sort(key=lambda r: (-r[%s], r[%s]))", quote(val), quote(in.Key)),
			fmt.Sprintf("open(%s, 'w').write(''.join(str(r[%s]) + '\\n' for r in sel))", quote(out), quote(in.Key)),
			"PY"},
		Checks: []Check{{Name: "selected", Paths: []string{out}, Body: exactText(out, data)}},
		Phrase: fmt.Sprintf("From `%s`, select the records whose `%s` is at least %d, order them by `%s` from largest to smallest (ties by `%s` ascending), and write their `%s` values to `%s`, one per line.",
			in.Path, val, limit, val, in.Key, in.Key, out),
		Produces: []*Artifact{{Path: out, Kind: Text, Data: data}},
	}
}

func jsonStats(g *Gen, in *Artifact) Contribution {
	val := Pick(g, in.Numeric)
	n, sum, lo, hi := 0, 0, 0, 0
	for _, r := range in.Records {
		v, _ := r.Get(val).(int)
		if n == 0 || v < lo {
			lo = v
		}
		if n == 0 || v > hi {
			hi = v
		}
		n++
		sum += v
	}
	stats := Record{{"count", n}, {"sum", sum}, {"min", lo}, {"max", hi}}
	out := g.Path("/app/out", fmt.Sprintf("%s_%s_stats", stem(in), val), ".json")
	obj := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(renderJSON([]Record{stats}))), "[\n  "), "\n]")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", "python3 - <<'PY'", "import json",
			fmt.Sprintf("v = [r[%s] for r in json.load(open(%s))]", quote(val), quote(in.Path)),
			fmt.Sprintf("json.dump({'count': len(v), 'sum': sum(v), 'min': min(v), 'max': max(v)}, open(%s, 'w'))", quote(out)),
			"PY"},
		Checks: []Check{{Name: "stats", Paths: []string{out}, Body: []string{
			fmt.Sprintf("assert json.loads(Path(%s).read_text()) == json.loads(%s)", quote(out), quote(obj)),
		}}},
		Phrase: fmt.Sprintf("Write a JSON object with the keys `count`, `sum`, `min` and `max` of the `%s` values in `%s` to `%s`.",
			val, in.Path, out),
		Produces: []*Artifact{{Path: out, Kind: Value, Data: []byte(obj + "\n")}},
	}
}
