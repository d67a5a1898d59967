package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/tokenizer"
)

//go:embed assets
var assets embed.FS

//go:embed templates/*.html
var pageFiles embed.FS

// Server serves one log and store as web pages. It only reads: every
// route is a GET, and nothing it serves writes to the log or the store.
type Server struct {
	Log   *engine.Log
	Store store.ObjectStore
	// Tokenizer turns token ids into the text the token view shows; nil
	// shows the ids.
	Tokenizer tokenizer.Tokenizer
	// Rescorer, when set, gives the trainer's view of an attempt: the
	// sampler-vs-trainer gap and the experts a replay-off update would
	// choose; nil leaves both out.
	Rescorer Rescorer
	// Run is the run the root page opens ("": the list of runs).
	Run string
	// Poll is how often a page of a run in progress looks for new events
	// (0: every second).
	Poll time.Duration
}

// Page sizes: rows of the attempts table and tokens of the token view a
// page holds, so that a page costs the same however large the run or the
// trajectory.
const (
	AttemptsPerPage = 100
	TokensPerPage   = 4096
)

var pages = parsePages()

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"num": num, "pct": pct, "join": func(xs []int64) string {
			s := make([]string, len(xs))
			for i, x := range xs {
				s[i] = fmt.Sprint(x)
			}
			return strings.Join(s, ", ")
		},
		"add": func(a, b int) int { return a + b },
		"div": func(a, b int) float64 { return float64(a) / float64(max(b, 1)) },
	}
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(pageFiles, "templates/layout.html"))
	out := map[string]*template.Template{}
	names, err := fs.Glob(pageFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "/layout.html") {
			continue
		}
		t := template.Must(template.Must(layout.Clone()).ParseFS(pageFiles, n))
		out[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return out
}

// Handler is the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.root)
	mux.HandleFunc("GET /runs/{run}", s.withRun(s.overview))
	mux.HandleFunc("GET /runs/{run}/attempts", s.withRun(s.attempts))
	mux.HandleFunc("GET /runs/{run}/attempt", s.withRun(s.attempt))
	mux.HandleFunc("GET /runs/{run}/routing", s.withRun(s.routing))
	mux.HandleFunc("GET /runs/{run}/compare", s.withRun(s.compare))
	mux.HandleFunc("GET /runs/{run}/live", s.withRun(s.live))
	return headers(mux)
}

// headers forbids what a page never needs: scripts, styles and images of
// any origin but this one, framing, and sniffing; so nothing a trajectory
// holds (an agent's output is the adversary's) can run or call out.
func headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// Serve serves the handler on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		// Open event streams end with the base context; Shutdown waits for
		// the rest.
		err := srv.Shutdown(shut)
		<-done
		return err
	}
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	if s.Run != "" {
		http.Redirect(w, r, "/runs/"+s.Run, http.StatusSeeOther)
		return
	}
	runs, err := report.Runs(r.Context(), s.Log)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.render(w, http.StatusOK, "runs", &view{Title: "Runs", Body: runs})
}

// withRun answers 404, naming the runs the log holds, for a run it does
// not hold, and otherwise calls h with the run's line of the runs list.
func (s *Server) withRun(h func(http.ResponseWriter, *http.Request, report.RunLine)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("run")
		runs, err := report.Runs(r.Context(), s.Log)
		if err != nil {
			s.fail(w, http.StatusInternalServerError, err)
			return
		}
		i := slices.IndexFunc(runs, func(l report.RunLine) bool { return l.Run == id })
		if i < 0 {
			var ids []string
			for _, l := range runs {
				ids = append(ids, l.Run)
			}
			s.fail(w, http.StatusNotFound, known.Unknown("run", "runs", id, ids))
			return
		}
		h(w, r, runs[i])
	}
}

// view is what every page's layout needs, around the page's own Body.
type view struct {
	Title string
	Run   *report.RunLine
	// Live, for a run still in progress, is how many events the page saw:
	// the page reloads itself when the run has more.
	Live uint64
	Nav  string
	Body any
}

func (v *view) live(l report.RunLine) *view {
	v.Run = &l
	if l.Status == report.StatusRunning {
		v.Live = max(l.Events, 1)
	}
	return v
}

func (s *Server) render(w http.ResponseWriter, code int, page string, v *view) {
	var b bytes.Buffer
	if err := pages[page].ExecuteTemplate(&b, "layout.html", v); err != nil {
		slog.Error("ui: render", "page", page, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	s.render(w, code, "error", &view{Title: http.StatusText(code), Body: err.Error()})
}

// live streams the run's event count (server-sent events) whenever it
// changes, for a page of a run in progress to reload itself.
func (s *Server) live(w http.ResponseWriter, r *http.Request, l report.RunLine) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, http.StatusInternalServerError, errors.New("ui: streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	poll := s.Poll
	if poll <= 0 {
		poll = time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var last uint64
	for {
		counts, err := s.Log.EventCounts(r.Context(), l.Run)
		if err != nil {
			return
		}
		if n := counts.Total(); n != last {
			last = n
			fmt.Fprintf(w, "data: %d\n\n", n)
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
