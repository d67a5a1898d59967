package ui

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/t1pipe/t1/query"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
)

// curve is one training curve of the overview: a metrics column by
// iteration.
type curve struct {
	Title string    `json:"title"`
	X     []float64 `json:"x"`
	Y     []float64 `json:"y"`
	// Rate pins the y axis to [0, 1].
	Rate bool `json:"rate"`
}

// curveColumns are the overview's curves, in order.
var curveColumns = []struct {
	col, title string
	rate       bool
}{
	{report.ColRewardMean, "mean reward", false},
	{report.ColResolveRate, "resolve rate", true},
	{report.ColApproxKL, "approx. KL", false},
	{report.ColClipFraction, "clip fraction", true},
	{report.ColExplainedVariance, "explained variance", false},
	{report.ColRoutingMismatches, "routing mismatches", false},
}

type overviewBody struct {
	Run *report.Run
	// MetricsErr is why the metrics table did not read.
	MetricsErr string
	Ancestors  []report.RunLine // oldest first
	Branches   []report.RunLine
	Recipe     []report.RecipeRow
	Columns    []string
	Curves     []curve
}

// Cell is column col of iteration it as the iterations table shows it.
func (b *overviewBody) Cell(it report.Iteration, col string) string {
	if v, ok := it.Value(col); ok {
		return num(v)
	}
	return "–"
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request, l report.RunLine) {
	run, err := report.LoadOverview(r.Context(), s.Log, s.Store, l.Run)
	if run == nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	b := &overviewBody{Run: run, Recipe: report.Recipe(run)}
	if err != nil {
		b.MetricsErr = err.Error()
	}
	if runs, err := report.Runs(r.Context(), s.Log); err == nil {
		byID := map[string]report.RunLine{}
		for _, x := range runs {
			byID[x.Run] = x
			if x.Parent == l.Run {
				b.Branches = append(b.Branches, x)
			}
		}
		for p := l.Parent; p != "" && len(b.Ancestors) < len(runs); p = byID[p].Parent {
			b.Ancestors = append([]report.RunLine{byID[p]}, b.Ancestors...)
		}
	}
	for _, c := range curveColumns {
		if !run.Metrics.Has(c.col) {
			continue
		}
		b.Columns = append(b.Columns, c.col)
		cv := curve{Title: c.title, Rate: c.rate}
		for _, it := range run.Metrics.Rows {
			if v, ok := it.Value(c.col); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
				cv.X, cv.Y = append(cv.X, float64(it.Iteration)), append(cv.Y, v)
			}
		}
		b.Curves = append(b.Curves, cv)
	}
	s.render(w, http.StatusOK, "overview", (&view{Title: l.Run, Nav: "overview", Body: b}).live(l))
}

// attemptLine is one row of the attempts table.
type attemptLine struct {
	Ref   attemptRef
	Cells []string
}

type attemptsBody struct {
	Where, Sort, Err string
	Desc             bool
	Page, Pages      int
	Total            int64
	Columns          []string
	Rows             []attemptLine
	Damaged          []query.Damage
}

// SortLink is the query string that sorts by col: descending when it
// sorts by col ascending now.
func (b *attemptsBody) SortLink(col string) template.URL {
	desc := "0"
	if b.Sort == col && !b.Desc {
		desc = "1"
	}
	return template.URL("sort=" + url.QueryEscape(col) + "&desc=" + desc + "&where=" + url.QueryEscape(b.Where))
}

// PageLink is the query string of page p.
func (b *attemptsBody) PageLink(p int) template.URL {
	desc := "0"
	if b.Desc {
		desc = "1"
	}
	return template.URL(fmt.Sprintf("sort=%s&desc=%s&where=%s&page=%d", url.QueryEscape(b.Sort), desc, url.QueryEscape(b.Where), p))
}

// attemptJSON is an attempts-view row; the verdict is null until scored.
type attemptJSON struct {
	Iteration     int      `json:"iteration"`
	Purpose       string   `json:"purpose"`
	Suite         string   `json:"suite"`
	PolicyVersion int64    `json:"policy_version"`
	TaskID        string   `json:"task_id"`
	Attempt       int      `json:"attempt"`
	Turns         int      `json:"turns"`
	Tokens        int64    `json:"tokens"`
	Termination   string   `json:"termination"`
	DurationMS    int64    `json:"duration_ms"`
	Reward        *float64 `json:"reward"`
	Passed        *int     `json:"passed"`
	Total         *int     `json:"total"`
}

func (s *Server) attempts(w http.ResponseWriter, r *http.Request, l report.RunLine) {
	q := r.URL.Query()
	b := &attemptsBody{Where: q.Get("where"), Sort: q.Get("sort"), Desc: q.Get("desc") == "1", Page: 1,
		Columns: []string{"iteration", "purpose", "policy_version", "task_id", "attempt", "reward", "passed", "turns", "tokens", "termination", "duration_ms"}}
	if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 0 {
		b.Page = p
	}
	code := http.StatusOK
	o := query.PageOptions{Run: l.Run, Tolerate: true, Offset: int64(b.Page-1) * AttemptsPerPage, Limit: AttemptsPerPage}
	if b.Sort != "" {
		o.Order = []query.Order{{Column: b.Sort, Desc: b.Desc}}
	}
	var err error
	if b.Where != "" {
		o.Where, err = query.ParseWhere(b.Where)
	}
	var p *query.Page
	if err == nil {
		p, err = query.ReadAttempts(r.Context(), s.Store, o)
	}
	if err != nil {
		b.Err, code = err.Error(), http.StatusBadRequest
	} else {
		defer p.Release()
		b.Total, b.Damaged = p.Total, p.Damaged
		b.Pages = int(max(1, (p.Total+AttemptsPerPage-1)/AttemptsPerPage))
		rows, err := decode[attemptJSON](p)
		if err != nil {
			b.Err = err.Error()
		}
		for _, a := range rows {
			reward, passed := "–", "–"
			if a.Reward != nil {
				reward = num(*a.Reward)
			}
			if a.Passed != nil && a.Total != nil {
				passed = fmt.Sprintf("%d/%d", *a.Passed, *a.Total)
			}
			b.Rows = append(b.Rows, attemptLine{
				Ref: attemptRef{a.Iteration, a.Purpose, a.PolicyVersion, a.TaskID, a.Attempt},
				Cells: []string{strconv.Itoa(a.Iteration), a.Purpose, strconv.FormatInt(a.PolicyVersion, 10), a.TaskID,
					strconv.Itoa(a.Attempt), reward, passed, strconv.Itoa(a.Turns), strconv.FormatInt(a.Tokens, 10),
					a.Termination, fmt.Sprintf("%.1f s", float64(a.DurationMS)/1000)}})
		}
	}
	s.render(w, code, "attempts", (&view{Title: l.Run + " · attempts", Nav: "attempts", Body: b}).live(l))
}

type attemptBody struct {
	Ref        attemptRef
	Trajectory section[trajectoryRow]
	Turns      section[turnRow]
	Reward     section[rewardRow]
	Tokens     *tokenView
}

func (s *Server) attempt(w http.ResponseWriter, r *http.Request, l report.RunLine) {
	ref, err := parseAttempt(r.URL.Query().Get)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	ctx := r.Context()
	b := &attemptBody{Ref: ref,
		Trajectory: read[trajectoryRow](ctx, s.Store, schemas.TrajectoriesTable, ref.of(l.Run, true, trajectoryCols)),
		Turns:      read[turnRow](ctx, s.Store, schemas.TurnsTable, ref.of(l.Run, true, turnCols)),
		Reward:     read[rewardRow](ctx, s.Store, schemas.RewardsTable, ref.of(l.Run, true, rewardCols)),
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("tpage"))
	b.Tokens = s.tokenView(ctx, l.Run, ref, r.URL.Query().Get("colour"), page)
	code := http.StatusOK
	if len(b.Trajectory.Rows) == 0 && !b.Trajectory.Bad() {
		code = http.StatusNotFound
		b.Trajectory.Err = fmt.Sprintf("run %s has no attempt %s", l.Run, ref)
	}
	s.render(w, code, "attempt", (&view{Title: ref.Task + " #" + strconv.Itoa(ref.Attempt), Nav: "attempts", Body: b}).live(l))
}

type compareSide struct {
	Version  int64
	Attempts section[attemptJSON]
	Turns    map[int]section[turnRow] // by attempt
}

type compareBody struct {
	Task     string
	A, B     int64
	Tasks    []string
	Versions []int64
	Err      string
	Sides    []compareSide
}

// Ref is the attempt a of side's task and version.
func (b *compareBody) Ref(a attemptJSON) attemptRef {
	return attemptRef{a.Iteration, a.Purpose, a.PolicyVersion, a.TaskID, a.Attempt}
}

func (s *Server) compare(w http.ResponseWriter, r *http.Request, l report.RunLine) {
	ctx, q := r.Context(), r.URL.Query()
	b := &compareBody{Task: q.Get("task")}
	// Which tasks were attempted under which versions: two columns of the
	// attempts view.
	p, err := query.ReadAttempts(ctx, s.Store, query.PageOptions{Run: l.Run, Tolerate: true, Select: []string{"task_id", "policy_version"}})
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	pairs, err := decode[attemptJSON](p)
	p.Release()
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	versions := map[string]map[int64]bool{}
	for _, a := range pairs {
		if versions[a.TaskID] == nil {
			versions[a.TaskID] = map[int64]bool{}
			b.Tasks = append(b.Tasks, a.TaskID)
		}
		versions[a.TaskID][a.PolicyVersion] = true
	}
	slices.Sort(b.Tasks)
	// Without a task, the first one attempted under two versions.
	if b.Task == "" {
		for _, t := range b.Tasks {
			if len(versions[t]) > 1 {
				b.Task = t
				break
			}
		}
	}
	for v := range versions[b.Task] {
		b.Versions = append(b.Versions, v)
	}
	slices.Sort(b.Versions)
	code := http.StatusOK
	if len(b.Versions) == 0 {
		b.Err = "no task of this run has attempts yet"
		if b.Task != "" {
			b.Err, code = fmt.Sprintf("run %s has no attempts of task %s", l.Run, b.Task), http.StatusNotFound
		}
		s.render(w, code, "compare", (&view{Title: l.Run + " · compare", Nav: "compare", Body: b}).live(l))
		return
	}
	b.A, b.B = b.Versions[0], b.Versions[len(b.Versions)-1]
	for i, name := range []string{"a", "b"} {
		if v, err := strconv.ParseInt(q.Get(name), 10, 64); err == nil {
			*[]*int64{&b.A, &b.B}[i] = v
		}
	}
	for _, v := range []int64{b.A, b.B} {
		side := compareSide{Version: v, Turns: map[int]section[turnRow]{}}
		where, _ := query.ParseWhere(fmt.Sprintf("task_id = %s AND policy_version = %d", quote(b.Task), v))
		p, err := query.ReadAttempts(ctx, s.Store, query.PageOptions{Run: l.Run, Where: where, Tolerate: true})
		if err != nil {
			side.Attempts.Err = err.Error()
		} else {
			side.Attempts.Damaged = p.Damaged
			side.Attempts.Rows, err = decode[attemptJSON](p)
			p.Release()
			if err != nil {
				side.Attempts.Err = err.Error()
			}
		}
		for i, a := range side.Attempts.Rows {
			ref := b.Ref(a)
			side.Turns[i] = read[turnRow](ctx, s.Store, schemas.TurnsTable, ref.of(l.Run, true, turnCols))
		}
		if len(side.Attempts.Rows) == 0 && side.Attempts.Err == "" {
			side.Attempts.Err = fmt.Sprintf("no attempt of %s under policy v%d", b.Task, v)
		}
		b.Sides = append(b.Sides, side)
	}
	s.render(w, code, "compare", (&view{Title: l.Run + " · compare", Nav: "compare", Body: b}).live(l))
}
