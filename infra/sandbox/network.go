package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/t1pipe/t1/infra/egress"
)

// netHook is how one bwrap command of a sandbox with a proxy gets it:
// bwrap tells its first process's pid on info and waits on block until
// the proxy listens in that process's network namespace.
type netHook struct {
	info  *os.File // read: bwrap's --info-fd
	block *os.File // write: bwrap's --block-fd
	l     net.Listener
}

// netArgs adds to a bwrap command's arguments and extra files (fd 3 on)
// the pipes the proxy's set-up needs, when the sandbox has a proxy.
func (b *box) netArgs(files []*os.File) ([]string, []*os.File, *netHook, error) {
	if b.proxy == nil {
		return nil, files, nil, nil
	}
	return proxyArgs(files)
}

// proxyArgs makes the pipes of a netHook, bwrap's ends appended to files
// (fd 3 onwards) and named in the arguments.
func proxyArgs(files []*os.File) ([]string, []*os.File, *netHook, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, files, nil, fmt.Errorf("sandbox: %w", err)
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, files, nil, fmt.Errorf("sandbox: %w", err)
	}
	args := []string{"--info-fd", strconv.Itoa(3 + len(files)), "--block-fd", strconv.Itoa(4 + len(files))}
	if ca := egress.CABundle(); ca != "" {
		args = append(args, "--ro-bind", ca, egress.CAPath)
	}
	return args, append(files, infoW, blockR), &netHook{info: infoR, block: blockW}, nil
}

// attachNet, for a started command with a netHook, makes the proxy's
// listener in the command's network namespace and lets the command go
// on. Until then the command has run nothing of its own.
func (b *box) attachNet(c *exec.Cmd) error {
	b.mu.Lock()
	h := b.nets[c]
	b.mu.Unlock()
	if h == nil {
		return nil
	}
	l, err := h.attach(b.proxy)
	if l != nil {
		b.mu.Lock()
		h.l = l
		b.mu.Unlock()
	}
	return err
}

// attach makes p's listener in the network namespace of the bwrap whose
// pipes h holds and lets that bwrap go on. The listener it returns, even
// with an error, is p's to Unserve.
func (h *netHook) attach(p *egress.Proxy) (net.Listener, error) {
	defer h.block.Close()
	_ = h.info.SetReadDeadline(time.Now().Add(30 * time.Second))
	var info struct {
		Pid int `json:"child-pid"`
	}
	err := json.NewDecoder(h.info).Decode(&info)
	h.info.Close()
	if err != nil || info.Pid <= 0 {
		return nil, fmt.Errorf("sandbox: network: bwrap did not say its sandbox's pid: %v", err)
	}
	l, err := egress.ListenIn(info.Pid)
	if err != nil {
		return nil, fmt.Errorf("sandbox: network: %w", err)
	}
	p.Serve(l)
	if _, err := h.block.Write([]byte{1}); err != nil {
		return l, fmt.Errorf("sandbox: network: releasing the sandbox: %w", err)
	}
	return l, nil
}

// detachNet closes a finished command's listener.
func (b *box) detachNet(c *exec.Cmd) {
	b.mu.Lock()
	h := b.nets[c]
	delete(b.nets, c)
	b.mu.Unlock()
	if h == nil {
		return
	}
	h.info.Close()
	h.block.Close()
	if h.l != nil {
		b.proxy.Unserve(h.l)
	}
}

var errNoNetwork = errors.New("sandbox: the plain backend runs commands on the host's network and cannot confine them to a proxy; use bwrap")
