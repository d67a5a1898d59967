package standin

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Server serves a stand-in on a loopback port and crashes it on demand:
// Kill drops every connection, the requests in flight included, and
// refuses new ones, as a killed engine process does; Revive starts it
// again on the same address with the weights it was started with.
type Server struct {
	URL string

	h         Restarter
	addr      string
	generates atomic.Int64
	killAfter atomic.Int64

	mu  sync.Mutex
	srv *http.Server
}

// Restarter is a stand-in that can go back to its initial weights.
type Restarter interface {
	http.Handler
	Restart()
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
	if r.URL.Path == "/generate" || r.URL.Path == "/v1/completions" {
		n := s.generates.Add(1)
		if k := s.killAfter.Load(); k > 0 && n >= k {
			s.killAfter.Store(0)
			go s.Kill()
			// The connection is cut with no answer, as a crash leaves it.
			panic(http.ErrAbortHandler)
		}
	}
	s.h.ServeHTTP(w, r)
}

// Generates counts the generation requests that reached the server.
func (s *Server) Generates() int { return int(s.generates.Load()) }

// KillAfter kills the server when its n-th generation request arrives,
// before that request is answered.
func (s *Server) KillAfter(n int) { s.killAfter.Store(int64(n)) }

// Kill closes the listener and every connection at once.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	s.start(ln)
	return nil
}

// Close stops the server.
func (s *Server) Close() { s.Kill() }

// Handler is the stand-in the server serves.
func (s *Server) Handler() Restarter { return s.h }
