package sandbox

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// diskInterval is how often a running command's disk usage is measured,
// at most: a walk that takes longer than a tenth of it stretches the
// interval to ten walks. Between two checks a fast writer can overshoot the
// budget by what it writes in that time, bounded per file by RLIMIT_FSIZE.
const diskInterval = 200 * time.Millisecond

// usage is the disk space, in bytes of allocated blocks, used by the
// writable directories; hard links count once and sparse holes not at all.
func (b *box) usage() int64 {
	var total int64
	seen := map[uint64]bool{}
	_ = filepath.WalkDir(b.fsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished while walking
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			total += info.Size()
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total
}

// diskWatch measures usage while a command runs. A command exceeds the
// budget when it takes usage past the limit and above where it started:
// after an overrun, the command that frees space must be able to run.
type diskWatch struct {
	b        *box
	start    int64 // usage when the command started, as last measured
	exceeded chan struct{}
	done     chan struct{}
	once     sync.Once
	stopOnce sync.Once
	mu       sync.Mutex
	used     int64
}

func (b *box) watchDisk() *diskWatch {
	start := b.lastUsed.Load()
	if start > b.limits.Disk {
		// Over the budget already: measure afresh, so that only this
		// command's own growth counts against it.
		start = b.usage()
		b.lastUsed.Store(start)
	}
	w := &diskWatch{b: b, start: start, exceeded: make(chan struct{}), done: make(chan struct{})}
	go func() {
		// A large tree makes each measurement expensive: keep the walks
		// under a tenth of the time.
		wait := diskInterval
		for {
			t := time.NewTimer(wait)
			select {
			case <-w.done:
				t.Stop()
				return
			case <-t.C:
			}
			start := time.Now()
			if w.check() {
				return
			}
			wait = max(diskInterval, 10*time.Since(start))
		}
	}()
	return w
}

// check measures once and reports whether the budget is exceeded.
func (w *diskWatch) check() bool {
	u := w.b.usage()
	w.b.lastUsed.Store(u)
	w.mu.Lock()
	w.used = u
	w.mu.Unlock()
	if u > w.b.limits.Disk && u > w.start {
		w.once.Do(func() { close(w.exceeded) })
		return true
	}
	return false
}

func (w *diskWatch) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// final stops the watch and measures once more, after the command.
func (w *diskWatch) final() bool {
	w.stop()
	return w.check()
}

// over says whether the last measurement was over the budget, whoever
// caused it.
func (w *diskWatch) over() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.used > w.b.limits.Disk
}

func (w *diskWatch) notice() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("\n[t1 sandbox: disk limit exceeded: the writable directories use %s, the limit is %s]\n",
		FormatSize(w.used), FormatSize(w.b.limits.Disk))
}

// stillOver is the notice for a command that ran while the directories
// were already over the budget, without adding to it.
func stillOver(w *diskWatch) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("\n[t1 sandbox: the writable directories are still over the disk limit: %s used, the limit is %s; free space]\n",
		FormatSize(w.used), FormatSize(w.b.limits.Disk))
}
