package faults_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/internal/testinfra"
)

// s3Outage is how long the S3 endpoint is unreachable by default;
// T1_FAULT_S3_OUTAGE (a Go duration) sets a longer one.
const s3Outage = 10 * time.Second

// The stages reach the embedded S3 gateway through a TCP proxy that, once
// the first attempts complete, drops every open connection and refuses new
// ones for s3Outage. Store errors are transient: the stages retry with
// back-off and finish with nothing lost, no failed events and no dead
// letters.
func TestS3Outage(t *testing.T) {
	testinfra.Long(t)
	outage := s3Outage
	if v := os.Getenv("T1_FAULT_S3_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("T1_FAULT_S3_OUTAGE: %v", err)
		}
		outage = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute+outage)
	defer cancel()
	sc := testinfra.StoreConfig(t)
	px := startProxy(t, sc.Endpoint)
	sc.Endpoint = px.addr
	st, err := s3.Open(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	l := testinfra.Log(t)
	startAttemptStages(t, l, st)

	want := requestAttempts(t, ctx, l, st, "clean")
	waitScored(t, l, "clean", 3*time.Minute)

	requestAttempts(t, ctx, l, st, "outage")
	waitStarted(t, l, "outage")
	px.down()
	time.Sleep(outage)
	px.up(t)
	waitScored(t, l, "outage", 3*time.Minute+outage)
	px.mu.Lock()
	t.Logf("proxy: %d connections accepted, %d cut by the outage", px.accepted, px.cut)
	px.mu.Unlock()
	checkNothingLost(t, outcomeOf(t, l, "outage"), outcomeOf(t, l, "clean"), want)
}

// proxy forwards TCP connections on addr to target. While down it listens
// on nothing, so new connections are refused, and it has closed every
// connection that was open.
type proxy struct {
	target, addr string

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	accepted int
	cut      int
	wg       sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.up(t)
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

// up listens again on the proxy's address.
func (p *proxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.forward(c)
			}()
		}
	}()
}

// down closes the listener and every connection through the proxy.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		p.cut++
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) forward(c net.Conn) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(c) {
		return
	}
	defer p.untrack(c)
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	p.mu.Lock()
	p.accepted++
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			dst.Close()
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}
