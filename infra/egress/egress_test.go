package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/egress"
)

// serve runs a proxy for allow on a loopback listener of the host.
func serve(t *testing.T, allow ...string) (*egress.Proxy, string) {
	t.Helper()
	p, err := egress.New(allow)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Serve(l)
	t.Cleanup(func() { p.Close() })
	return p, l.Addr().String()
}

func TestProxyRefusesWhatIsNotAGetOfAnAllowedHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Method+" ok "+r.Host)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p, addr := serve(t, host)
	pu, _ := url.Parse("http://" + addr)
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}

	get := func(method, u string) (int, string) {
		req, _ := http.NewRequest(method, u, strings.NewReader("x"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("GET", srv.URL+"/a"); code != 200 || body != "GET ok "+host {
		t.Errorf("GET of the allowed host: %d %q", code, body)
	}
	// A Host header naming another server is not what reaches the
	// allowed one.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(raw, "GET %s/a HTTP/1.1\r\nHost: other.example\r\n\r\n", srv.URL)
	if resp, err := http.ReadResponse(bufio.NewReader(raw), nil); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "GET ok "+host {
			t.Errorf("GET with Host other.example reached the server as %q", b)
		}
	}
	raw.Close()
	if code, body := get("POST", srv.URL+"/a"); code != 405 || !strings.Contains(body, "GET and HEAD only") {
		t.Errorf("POST of the allowed host: %d %q", code, body)
	}
	_, port, _ := net.SplitHostPort(host)
	if code, body := get("GET", "http://localhost:"+port+"/a"); code != 403 || !strings.Contains(body, "not on the sandbox's allow-list") {
		t.Errorf("another name of the same server: %d %q", code, body)
	}
	// Not a proxy request at all.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /a HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || resp.StatusCode != 400 {
		t.Errorf("origin-form request: %v %v", resp, err)
	}
	p.Close()
	reqs, _ := p.Requests()
	var got []string
	for _, r := range reqs {
		got = append(got, fmt.Sprintf("%s %v", r.Method, r.Allowed))
	}
	// A request is logged once answered: the client may be on to the
	// next one by then.
	slices.Sort(got)
	if strings.Join(got, ",") != "GET false,GET false,GET true,GET true,POST false" {
		t.Errorf("log %q", got)
	}
}

func TestProxyPortsAndEntries(t *testing.T) {
	p, addr := serve(t, "registry.example")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// An allowed name on a port other than 443 is refused without a dial.
	fmt.Fprintf(conn, "CONNECT registry.example:22 HTTP/1.1\r\nHost: registry.example:22\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("CONNECT to port 22: %v %v", resp, err)
	}
	reqs, _ := p.Requests()
	if len(reqs) != 1 || reqs[0].Allowed || !strings.Contains(reqs[0].Reason, "port 22") {
		t.Errorf("log %+v", reqs)
	}
	for _, bad := range []string{"", "http://pypi.org", "*.pypi.org", "pypi.org:0", "pypi.org:x"} {
		if _, err := egress.New([]string{bad}); err == nil {
			t.Errorf("entry %q accepted", bad)
		}
	}
}

// A flood of requests is answered but logs at most MaxRequests.
func TestProxyLogIsBounded(t *testing.T) {
	p, addr := serve(t, "registry.example")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	for range egress.MaxRequests + 5 {
		fmt.Fprintf(conn, "CONNECT other.example:443 HTTP/1.1\r\nHost: other.example:443\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		conn.Close()
		if conn, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		br = bufio.NewReader(conn)
	}
	conn.Close()
	p.Close()
	reqs, omitted := p.Requests()
	if len(reqs) != egress.MaxRequests || omitted != 5 {
		t.Errorf("logged %d, omitted %d", len(reqs), omitted)
	}
}

// Connections past MaxConns are closed unanswered, and the proxy takes
// new ones again once some end.
func TestProxyBoundsConnections(t *testing.T) {
	_, addr := serve(t, "registry.example")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range egress.MaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	// The held connections say nothing: the proxy waits on each. They
	// are accepted, and counted, before the next one.
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	fmt.Fprintf(extra, "GET http://other.example/ HTTP/1.1\r\nHost: other.example\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(extra), nil); err == nil {
		t.Fatalf("connection past the bound answered: %s", resp.Status)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	for range 100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET http://other.example/ HTTP/1.1\r\nHost: other.example\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err == nil && resp.StatusCode == 403 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the proxy took no connection after the held ones ended")
}
