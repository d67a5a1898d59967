package ui

import (
	"bufio"
	"bytes"
	"context"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// A trajectory longer than a page shows TokensPerPage tokens a page,
// turns numbered across chunks, the chunk that began with a repair
// marked, and the agent's text escaped.
func TestAttemptTokensPaged(t *testing.T) {
	f := newFixture(t, "u")
	f.attempt(t, 0, "long", 1, 10000, 4096)
	code, body := f.get(t, f.attemptPath(0, "long", 1))
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, body)
	}
	spans := func(b string) int { return strings.Count(b, `<span class="t`) }
	if n := spans(body); n != TokensPerPage || !strings.Contains(body, "10000 tokens · page 1 of 3") {
		t.Fatalf("page 1: %d tokens shown", n)
	}
	if strings.Contains(body, "<b>turn 0</b>") || !strings.Contains(body, "echo &lt;b&gt;turn 0&lt;/b&gt;") {
		t.Fatal("the agent's action is not escaped")
	}
	if got := strings.Count(body, `<li class="turn"`); got != 19 {
		t.Fatalf("%d turns shown, 19 written", got)
	}
	if !strings.Contains(body, "context compacted before this turn") || !strings.Contains(body, `id="verdict">reward <b>0.5</b> · 1/2 assertions passed`) {
		t.Fatal("compaction boundary or verdict missing")
	}
	_, two := f.get(t, f.attemptPath(0, "long", 1)+"&tpage=2")
	// Chunk 1 starts at token 4096 with a strict-prefix repair; its first
	// turn is the attempt's ninth (eight turns a 4096-token chunk).
	if !strings.Contains(two, `<span class="mark repair">chunk 1 · TITO repair: strict_prefix</span>`) || !strings.Contains(two, ">turn 8<") ||
		!strings.Contains(two, `data-i="4096"`) {
		t.Fatal("page 2 lacks chunk 1's repair mark or turn 8")
	}
	_, last := f.get(t, f.attemptPath(0, "long", 1)+"&tpage=3&colour=advantage")
	if n := spans(last); n != 10000-2*TokensPerPage || !strings.Contains(last, "<b>advantage</b>") {
		t.Fatalf("page 3: %d tokens shown", n)
	}
}

// A damaged object is named on the page with its error; what the other
// objects hold is still shown.
func TestDamagedObject(t *testing.T) {
	f := newFixture(t, "u")
	f.attempt(t, 0, "a", 1, 1200, 4096)
	turns := f.refs["turns"].Key
	f.attempt(t, 1, "b", 2, 600, 4096)
	rewards := f.refs["rewards"].Key
	junk := []byte("PAR1 not a parquet file PAR1")
	for _, key := range []string{turns, rewards} {
		if _, err := f.st.Put(context.Background(), key, bytes.NewReader(junk), int64(len(junk)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := f.get(t, f.attemptPath(0, "a", 1))
	if code != http.StatusOK || !strings.Contains(body, "Object "+turns+" did not read (") {
		t.Fatalf("%d: the damaged turns object is not named\n%s", code, body)
	}
	if !strings.Contains(body, `id="verdict"`) || strings.Count(body, `<span class="t`) != 1200 {
		t.Fatal("the rest of the attempt is not shown")
	}
	code, body = f.get(t, "/runs/u/attempts")
	if code != http.StatusOK || !strings.Contains(body, "Object "+rewards+" did not read (") || !strings.Contains(body, `id="count">2 attempts`) {
		t.Fatalf("%d: attempts page with a damaged rewards object\n%s", code, body)
	}
}

// A page of a run in progress listens for its events; the stream says
// when the count grows, and the page of a completed run no longer
// listens.
func TestLiveUpdates(t *testing.T) {
	f := newFixture(t, "u")
	f.srv.Poll = 20 * time.Millisecond
	_, body := f.get(t, "/runs/u")
	if !strings.Contains(body, `data-live="/runs/u/live"`) {
		t.Fatal("the page of a running run does not listen")
	}
	srv := httptest.NewServer(f.srv.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/runs/u/live", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	next := func() int {
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				v, _ := strconv.Atoi(n)
				return v
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return 0
	}
	if n := next(); n != 1 {
		t.Fatalf("first count %d, want 1", n)
	}
	f.publish(t, schemas.IterationStarted, "it-0", schemas.IterationStartedPayload{Iteration: 0, PolicyVersion: 1})
	if n := next(); n != 2 {
		t.Fatalf("count after an event %d, want 2", n)
	}
	f.publish(t, schemas.RunCompleted, "done", schemas.RunCompletedPayload{Iterations: 0})
	if _, body := f.get(t, "/runs/u"); strings.Contains(body, "data-live") || !strings.Contains(body, `id="status">completed`) {
		t.Fatal("the page of a completed run still listens")
	}
}

// A run the log does not hold is a 404 naming those it does; the server
// answers nothing but reads.
func TestUnknownRunAndReadOnly(t *testing.T) {
	f := newFixture(t, "u")
	code, body := f.get(t, "/runs/uu/attempts")
	if code != http.StatusNotFound || !regexp.MustCompile(`unknown run &#34;uu&#34; \(runs: u\)`).MatchString(body) {
		t.Fatalf("%d\n%s", code, body)
	}
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/runs/u", strings.NewReader("x")))
	if w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST answered %d", w.Code)
	}
	if code, body := f.get(t, "/runs/u/attempt?it=0&purpose=train&v=1&task=none&n=0"); code != http.StatusNotFound || !strings.Contains(body, "has no attempt none #0") {
		t.Fatalf("missing attempt: %d", code)
	}
	if code, _ := f.get(t, "/runs/u/attempt?it=x"); code != http.StatusBadRequest {
		t.Fatalf("bad attempt parameters: %d", code)
	}
}

// The routing page shows the experts of the token asked for, from its
// chunk's record, and each layer's load.
func TestRoutingPage(t *testing.T) {
	f := newFixture(t, "u")
	f.attempt(t, 0, "a", 1, 1000, 600)
	code, body := f.get(t, "/runs/u/routing?it=0&purpose=train&v=1&task=a&n=0&token=700")
	if code != http.StatusOK || !strings.Contains(body, "1000 tokens · 4 layers · top-2 of 8 experts") {
		t.Fatalf("%d\n%s", code, body)
	}
	if n := strings.Count(body, `<span class="expert">`); n != 4*2 {
		t.Fatalf("%d experts shown for one token, want 4 layers × 2", n)
	}
}

// The uPlot the binary embeds is the file npm installs from the lock.
func TestEmbeddedUPlotIsNPMs(t *testing.T) {
	dir := filepath.Join(testinfra.WorkDir(), "testdata", "node_modules", "uplot")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("testdata/node_modules is not installed (make setup installs it)")
	}
	for embedded, installed := range map[string]string{"uPlot.iife.min.js": "dist/uPlot.iife.min.js", "uPlot.min.css": "dist/uPlot.min.css", "uPlot.LICENSE": "LICENSE"} {
		a, err := assets.ReadFile("assets/" + embedded)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, installed))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("assets/%s differs from npm's %s: copy it again", embedded, installed)
		}
	}
}

// The colourings' scales: probability red to green, advantage and gap
// deeper with their size, their sign the hue.
func TestColourScales(t *testing.T) {
	for got, want := range map[template.CSS]string{
		probColour(0): "background:hsl(0,75%,78%)", probColour(0.5): "background:hsl(60,75%,78%)", probColour(1): "background:hsl(120,75%,78%)",
		advColour(2, 2): "background:hsl(120,70%,55%)", advColour(-1, 2): "background:hsl(0,70%,75%)", advColour(1, 0): "background:hsl(0,0%,92%)",
		gapColour(0.5): "background:hsl(210,80%,73%)", gapColour(-3): "background:hsl(30,80%,50%)",
	} {
		if string(got) != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
}
