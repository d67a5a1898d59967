package testinfra

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a NATS cluster of JetStream servers in the test process, each
// on random ports with its store in the test's temporary directory. A
// server can be killed and restarted on its ports and store, as a node of
// a real cluster comes back.
type Cluster struct {
	t       testing.TB
	opts    []*server.Options
	servers []*server.Server
}

// StartCluster starts n clustered servers and waits until JetStream has
// elected its meta leader and it sees every node, so that streams of up
// to n replicas can be created. The servers stop when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, servers: make([]*server.Server, n)}
	// The ports are chosen before any server starts: every route names
	// them all, and a restarted server must come back where its peers
	// expect it.
	client, routes := freePorts(t, n), freePorts(t, n)
	dir := t.TempDir()
	for i := range n {
		var peers []*url.URL
		for j := range n {
			if j != i {
				peers = append(peers, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", routes[j])})
			}
		}
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("t1-node-%d", i),
			Host:       "127.0.0.1",
			Port:       client[i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("node-%d", i)),
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
			Cluster:    server.ClusterOpts{Name: "t1-test", Host: "127.0.0.1", Port: routes[i]},
			Routes:     peers,
		})
	}
	for i := range n {
		c.Restart(i)
	}
	t.Cleanup(func() {
		for i := range c.servers {
			c.Kill(i)
		}
	})
	c.waitLeader()
	return c
}

// URLs are the servers' client URLs, for a client that fails over.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return urls
}

// Kill stops server i, as a crashed node stops, and waits until its store
// is closed.
func (c *Cluster) Kill(i int) {
	if s := c.servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.servers[i] = nil
	}
}

// Restart starts server i again on its ports and store.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	o := *c.opts[i]
	s, err := server.NewServer(&o)
	if err != nil {
		c.t.Fatalf("cluster node %d: %v", i, err)
	}
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		c.t.Fatalf("cluster node %d not ready after 20s", i)
	}
	c.servers[i] = s
}

// StreamLeader is the index of the server leading the stream, or -1 when
// none is (during an election).
func (c *Cluster) StreamLeader(stream string) int {
	for i, s := range c.servers {
		if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// waitLeader waits until a meta leader is elected and counts every node
// as a peer streams can be placed on: one elected before the others'
// first statistics reached it refuses a stream of n replicas ("no
// suitable peers for placement"), as seen on a loaded machine.
func (c *Cluster) waitLeader() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.servers {
			if s != nil && s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.servers) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("the cluster elected no JetStream meta leader that sees its %d peers in 30s", len(c.servers))
}

// freePorts finds n ports free on the loopback interface now.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
