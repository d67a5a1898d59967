package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Port is where the proxy listens inside a sandbox, on loopback.
const Port = 3128

// MaxRequests bounds the requests one proxy logs.
const MaxRequests = 1000

// MaxConns bounds the connections one proxy holds at once, the sandbox's
// and the upstream ones together: past it a new client connection is
// closed unanswered, so a sandbox cannot make the host hold sockets and
// goroutines without bound.
const MaxConns = 256

// Policies of a sandbox's network.
const (
	// None: loopback only, no way out (the default).
	None = "none"
	// Registries: the proxy, to the allow-list only.
	Registries = "registries"
)

// DefaultHosts are the registries every allow-list starts from when none
// is configured, besides the host's Debian mirrors: PyPI's index and
// files, and npm's registry.
var DefaultHosts = []string{"pypi.org", "files.pythonhosted.org", "registry.npmjs.org"}

// CAPath is where a sandbox or a build step with the proxy finds the
// host's certificate bundle (CABundle): in bwrap's own /dev, which is
// neither the image's nor in a snapshot.
const CAPath = "/dev/t1/ca-certificates.crt"

// CABundle is the host's certificate bundle, the one t1's own TLS
// clients trust (SSL_CERT_FILE, else Debian's
// /etc/ssl/certs/ca-certificates.crt), or "" when there is none. A host
// whose egress goes through a TLS-intercepting gateway trusts the
// gateway's authority there; an image's own bundle would not, and every
// https download through the tunnel would fail its certificate check.
// The bundle holds public certificates only.
var CABundle = sync.OnceValue(func() string {
	for _, p := range []string{os.Getenv("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
})

// Env is what a sandbox's commands need to find the proxy: the variables
// pip, uv, npm, apt, curl and Go's net/http read, and, where the host has
// a certificate bundle, those that make Python, pip, uv, curl, git and
// node trust it at CAPath. Loopback is left out, so a service the
// sandbox runs itself is reached directly.
func Env() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(Port)
	env := []string{
		"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
		"npm_config_proxy=" + u, "npm_config_https_proxy=" + u,
	}
	if CABundle() != "" {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"} {
			env = append(env, k+"="+CAPath)
		}
	}
	return env
}

// Request is one request the proxy answered.
type Request struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Method string `json:"method"`
	// Allowed says it went through; Reason says why not, or what failed
	// on the way (the server unreachable).
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	// Bytes carried: both ways through a tunnel, the response's body
	// for plain http.
	Bytes int64 `json:"bytes"`
}

func (r Request) String() string {
	s := fmt.Sprintf("%s %s:%d ", r.Method, r.Host, r.Port)
	if r.Allowed {
		s += fmt.Sprintf("allowed %d bytes", r.Bytes)
	} else {
		s += "refused"
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// Proxy forwards requests to the hosts of its allow-list.
type Proxy struct {
	allow map[string]bool // "host" or "host:port", lower case
	hosts []string        // as given, for messages
	tr    *http.Transport

	mu      sync.Mutex
	log     []Request
	omitted int
	closed  bool
	lns     map[net.Listener]struct{}
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// New returns a proxy for the allow-list hosts (see the package
// documentation for the entries' form).
func New(hosts []string) (*Proxy, error) {
	p := &Proxy{allow: map[string]bool{}, lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	for _, h := range hosts {
		e, err := entry(h)
		if err != nil {
			return nil, err
		}
		p.allow[e] = true
		p.hosts = append(p.hosts, h)
	}
	d := &net.Dialer{Timeout: 30 * time.Second}
	p.tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       30 * time.Second,
		DisableCompression:    true,
	}
	return p, nil
}

// entry checks an allow-list entry and returns its canonical form.
func entry(h string) (string, error) {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" || strings.ContainsAny(h, "/*@ ") {
		return "", fmt.Errorf("egress: allow-list entry %q: want a host name or address, optionally with :port", h)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port.
		return strings.TrimSuffix(strings.Trim(h, "[]"), "."), nil
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("egress: allow-list entry %q: bad port", h)
	}
	return strings.TrimSuffix(host, ".") + ":" + strconv.Itoa(n), nil
}

// Hosts is the allow-list as given.
func (p *Proxy) Hosts() []string { return append([]string(nil), p.hosts...) }

// permits says whether host:port may be reached with a request of the
// given kind, and if not, why.
func (p *Proxy) permits(host string, port int, connect bool) (bool, string) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if p.allow[host+":"+strconv.Itoa(port)] {
		return true, ""
	}
	def := 80
	if connect {
		def = 443
	}
	if p.allow[host] {
		if port == def {
			return true, ""
		}
		return false, fmt.Sprintf("port %d of %s is not allowed (only %d for this request)", port, host, def)
	}
	return false, fmt.Sprintf("%s is not on the sandbox's allow-list (%s)", host, strings.Join(p.hosts, ", "))
}

// Requests returns the log so far and how many requests were answered
// past MaxRequests without being logged.
func (p *Proxy) Requests() ([]Request, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log...), p.omitted
}

func (p *Proxy) record(r Request) {
	p.mu.Lock()
	if len(p.log) < MaxRequests {
		p.log = append(p.log, r)
	} else {
		p.omitted++
	}
	p.mu.Unlock()
}

// Serve answers the connections l accepts until l or the proxy is
// closed; it returns at once. The proxy owns l from here.
func (p *Proxy) Serve(l net.Listener) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return
	}
	p.lns[l] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if !p.track(c) {
				c.Close()
				continue
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.untrack(c)
				p.serveConn(c)
			}()
		}
	}()
}

// Unserve closes l, which Serve was given: connections it accepted
// carry on until they end or the proxy closes.
func (p *Proxy) Unserve(l net.Listener) {
	p.mu.Lock()
	delete(p.lns, l)
	p.mu.Unlock()
	l.Close()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.conns) >= MaxConns {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Close stops every listener and connection, and returns when every
// request in progress is logged.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for l := range p.lns {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	return nil
}

// serveConn answers the requests of one client connection: plain http
// requests one after another (keep-alive), or one CONNECT tunnel.
func (p *Proxy) serveConn(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		// A client that says nothing for a while is let go.
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Minute))
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
				refuse(c, http.StatusBadRequest, "not an HTTP request: "+err.Error())
			}
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			p.tunnel(c, br, req)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// refuse answers a request the proxy will not carry.
func refuse(c net.Conn, code int, reason string) {
	body := "t1 egress proxy: " + reason + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(body), body)
}

// hostPort splits an authority, defaulting the port.
func hostPort(authority string, def int) (string, int, error) {
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(authority, "[]"), def, nil
		}
		return "", 0, err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("bad port %q", port)
	}
	return host, n, nil
}

func (p *Proxy) tunnel(c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := hostPort(req.Host, 443)
	r := Request{Host: host, Port: port, Method: req.Method}
	if err != nil || host == "" {
		r.Host, r.Reason = req.Host, fmt.Sprintf("bad CONNECT authority %q", req.Host)
		p.record(r)
		refuse(c, http.StatusBadRequest, r.Reason)
		return
	}
	if ok, why := p.permits(host, port, true); !ok {
		r.Reason = why
		p.record(r)
		refuse(c, http.StatusForbidden, why)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	up, err := p.tr.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	cancel()
	if err != nil {
		r.Reason = "dial: " + err.Error()
		p.record(r)
		refuse(c, http.StatusBadGateway, r.Reason)
		return
	}
	if !p.track(up) {
		up.Close()
		r.Reason = fmt.Sprintf("more than %d connections at once, or the proxy closed", MaxConns)
		p.record(r)
		refuse(c, http.StatusServiceUnavailable, r.Reason)
		return
	}
	defer p.untrack(up)
	r.Allowed = true
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.record(r)
		return
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		// What the client sent after CONNECT and the reader buffered
		// goes first.
		k, _ := io.Copy(up, io.MultiReader(io.LimitReader(br, int64(br.Buffered())), c))
		n.Add(k)
		closeWrite(up)
	})
	k, _ := io.Copy(c, up)
	n.Add(k)
	closeWrite(c)
	wg.Wait()
	r.Bytes = n.Load()
	p.record(r)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// hopHeaders are a proxy's own: never forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward carries one plain http request; it reports whether the client
// connection can take another.
func (p *Proxy) forward(c net.Conn, req *http.Request) bool {
	// No body goes upstream, but one sent must be read past for the next
	// request on the connection to parse; a large one ends it.
	if n, _ := io.Copy(io.Discard, io.LimitReader(req.Body, 1<<16+1)); n > 1<<16 {
		req.Close = true
	}
	r := Request{Method: req.Method}
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		r.Host, r.Reason = req.Host, fmt.Sprintf("%s %s is not a proxy request (want an absolute http:// URL, or CONNECT for https)", req.Method, req.URL)
		p.record(r)
		refuse(c, http.StatusBadRequest, r.Reason)
		return false
	}
	host, port, err := hostPort(req.URL.Host, 80)
	r.Host, r.Port = host, port
	if err != nil {
		r.Reason = err.Error()
		p.record(r)
		refuse(c, http.StatusBadRequest, r.Reason)
		return false
	}
	if ok, why := p.permits(host, port, false); !ok {
		r.Reason = why
		p.record(r)
		refuse(c, http.StatusForbidden, why)
		return false
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		r.Reason = fmt.Sprintf("method %s: plain http through the proxy is GET and HEAD only (registries are read, not written)", req.Method)
		p.record(r)
		refuse(c, http.StatusMethodNotAllowed, r.Reason)
		return false
	}
	out := req.Clone(context.Background())
	// The Host header is the allowed host's: another name sent to an
	// allowed server (a CDN's) would reach a host off the list.
	out.RequestURI, out.Host = "", req.URL.Host
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	// GET and HEAD carry no body upstream.
	out.Body, out.ContentLength = nil, 0
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		r.Allowed, r.Reason = true, "upstream: "+err.Error()
		p.record(r)
		refuse(c, http.StatusBadGateway, r.Reason)
		return false
	}
	for _, h := range hopHeaders {
		if h != "Transfer-Encoding" && h != "Trailer" {
			resp.Header.Del(h)
		}
	}
	body := &counter{r: resp.Body}
	resp.Body = body
	keep := !req.Close
	resp.Close = !keep
	err = resp.Write(c)
	body.r.Close()
	r.Allowed, r.Bytes = true, body.n
	if err != nil {
		r.Reason = "client: " + err.Error()
		keep = false
	}
	p.record(r)
	return keep
}

// counter counts what is read through it.
type counter struct {
	r io.ReadCloser
	n int64
}

func (c *counter) Read(b []byte) (int, error) {
	if c.r == nil {
		return 0, io.EOF
	}
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

func (c *counter) Close() error {
	if c.r == nil {
		return nil
	}
	return c.r.Close()
}
