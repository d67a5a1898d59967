package sandbox

import (
	"fmt"
	"io"
	"sync"
)

// headTail keeps the first and last max/2 bytes written to it and counts
// the rest, so a command that prints a gigabyte costs a fixed amount of
// memory. Safe for concurrent use.
type headTail struct {
	mu     sync.Mutex
	max    int
	head   []byte
	tail   []byte // ring buffer of the last max-max/2 bytes once head is full
	pos    int    // next write position in tail when full
	full   bool   // tail has wrapped at least once
	total  int64
	stream io.Writer
}

func newHeadTail(max int, stream io.Writer) *headTail {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	if max < 2 {
		max = 2
	}
	return &headTail{max: max, stream: stream}
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stream != nil {
		// A failing stream (a closed terminal) must not fail the command.
		_, _ = h.stream.Write(p)
	}
	n := len(p)
	h.total += int64(n)
	headMax := h.max / 2
	if len(h.head) < headMax {
		k := min(headMax-len(h.head), len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	tailMax := h.max - headMax
	if len(p) >= tailMax {
		h.tail = append(h.tail[:0], p[len(p)-tailMax:]...)
		h.pos, h.full = 0, true
		return n, nil
	}
	for len(p) > 0 {
		if !h.full {
			k := min(tailMax-len(h.tail), len(p))
			h.tail = append(h.tail, p[:k]...)
			p = p[k:]
			if len(h.tail) == tailMax {
				h.full, h.pos = true, 0
			}
			continue
		}
		k := copy(h.tail[h.pos:], p)
		p = p[k:]
		h.pos = (h.pos + k) % tailMax
	}
	return n, nil
}

// result returns the kept bytes, with an omission line in the middle when
// bytes were dropped, and whether any were.
func (h *headTail) result() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var tail []byte
	if h.full {
		tail = append(append([]byte{}, h.tail[h.pos:]...), h.tail[:h.pos]...)
	} else {
		tail = h.tail
	}
	kept := int64(len(h.head) + len(tail))
	if kept == h.total {
		return string(h.head) + string(tail), false
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s", h.head, h.total-kept, tail), true
}
