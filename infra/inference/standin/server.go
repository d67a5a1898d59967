package standin

import (
	"errors"
	"net"
	"net/http"
	"sync"
)

// Server serves a stand-in on a loopback port and crashes it on demand:
// Kill drops every connection, the requests in flight included, and
// refuses new ones, as a killed engine process does; Revive starts it
// again on the same address with the weights it was started with.
type Server struct {
	URL string

	h    Restarter
	addr string

	mu        sync.Mutex
	srv       *http.Server
	generates int
	// killAfter > 0: the killAfter-th generation request served as
	// killVersion ("" any) kills the server; killCount counts them.
	killAfter   int
	killVersion string
	killCount   int
	// dead: killed; a request that raced the kill is cut too.
	dead bool
}

// Restarter is a stand-in that can go back to its initial weights.
type Restarter interface {
	http.Handler
	Restart()
	// WeightVersion is the weight version served now.
	WeightVersion() string
}

// Serve starts h on 127.0.0.1 at a free port.
func Serve(h Restarter) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{h: h, addr: ln.Addr().String()}
	s.URL = "http://" + s.addr
	s.start(ln)
	return s, nil
}

func (s *Server) start(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(s.serve)}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	dead := s.dead
	if !dead && (r.URL.Path == "/generate" || r.URL.Path == "/v1/completions") {
		s.generates++
		if s.killAfter > 0 && (s.killVersion == "" || s.h.WeightVersion() == s.killVersion) {
			s.killCount++
			dead = s.killCount >= s.killAfter
			s.dead = dead
		}
	}
	s.mu.Unlock()
	if dead {
		go s.Kill()
		// The connection is cut with no answer, as a crash leaves it.
		panic(http.ErrAbortHandler)
	}
	s.h.ServeHTTP(w, r)
}

// Generates counts the generation requests that reached the server alive.
func (s *Server) Generates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.generates
}

// KillAfter kills the server when the n-th generation request arrives
// while it serves weight version version ("" any), before that request is
// answered.
func (s *Server) KillAfter(n int, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killAfter, s.killVersion, s.killCount = n, version, 0
}

// Killed reports whether the server is down.
func (s *Server) Killed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// Kill closes the listener and every connection at once.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	if s.srv != nil {
		_ = s.srv.Close()
		s.srv = nil
	}
}

// Revive restarts a killed server on its address, serving its initial
// weights (weight version "default") as a restarted engine does.
func (s *Server) Revive() error {
	s.mu.Lock()
	alive := s.srv != nil
	s.mu.Unlock()
	if alive {
		return errors.New("standin: revive of a server that is running")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.h.Restart()
	s.mu.Lock()
	s.dead, s.killAfter = false, 0
	s.mu.Unlock()
	s.start(ln)
	return nil
}

// Close stops the server.
func (s *Server) Close() { s.Kill() }

// Handler is the stand-in the server serves.
func (s *Server) Handler() Restarter { return s.h }
