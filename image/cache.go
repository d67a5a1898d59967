package image

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/sandbox"
)

// cache is the layer directory: <dir>/layers/<key> is a finished layer
// (it appears by rename, so its presence means complete), <dir>/sizes/<key>
// its size, <dir>/tmp holds layers being built, <dir>/debs debootstrap's
// package cache. One build
// at a time holds <dir>/lock.
type cache struct {
	dir  string
	lock *os.File
}

func openCache(dir string) (*cache, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image: cache: %w", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "layers"), filepath.Join(dir, "tmp"), filepath.Join(dir, "sizes")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image: cache: %w", err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image: cache: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("image: cache lock: %w", err)
	}
	return &cache{dir: dir, lock: f}, nil
}

func (c *cache) close() { c.lock.Close() }

func (c *cache) path(key string) string { return filepath.Join(c.dir, "layers", key) }

// get returns the layer of key, building it with build(upper, work, mnt)
// when it is not there yet: build writes the layer into upper (work and
// mnt are empty scratch directories beside it).
func (c *cache) get(key string, build func(upper, work, mnt string) error) (string, bool, error) {
	p := c.path(key)
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		// A layer made before the marks existed gets them now.
		if err := markOpaque(p); err != nil {
			return "", false, err
		}
		return p, true, nil
	}
	scratch, release, err := c.scratch()
	if err != nil {
		return "", false, err
	}
	defer release()
	upper := filepath.Join(scratch, "upper")
	if err := build(upper, filepath.Join(scratch, "work"), filepath.Join(scratch, "mnt")); err != nil {
		return "", false, err
	}
	if err := markOpaque(upper); err != nil {
		return "", false, err
	}
	// The size first: a layer in place always has one.
	if err := os.WriteFile(c.sizePath(key), []byte(strconv.FormatInt(dirSize(upper), 10)), 0o600); err != nil {
		return "", false, fmt.Errorf("image: cache: %w", err)
	}
	if err := os.Rename(upper, p); err != nil {
		return "", false, fmt.Errorf("image: cache: %w", err)
	}
	return p, false, nil
}

func (c *cache) sizePath(key string) string { return filepath.Join(c.dir, "sizes", key) }

// size is the bytes of the layer's files, measured when it was made.
func (c *cache) size(key string) int64 {
	data, err := os.ReadFile(c.sizePath(key))
	if err != nil {
		n := dirSize(c.path(key))
		_ = os.WriteFile(c.sizePath(key), []byte(strconv.FormatInt(n, 10)), 0o600)
		return n
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// scratch makes tmp/<random>/{upper,work,mnt}, recorded (hostres)
// before it exists, so that a build killed half-way leaves the next
// start a record of it; release removes it and the record.
func (c *cache) scratch() (string, func(), error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	d := filepath.Join(c.dir, "tmp", hex.EncodeToString(b[:]))
	claim, err := hostres.Record(hostres.Dir, d, "image build scratch")
	if err != nil {
		return "", nil, fmt.Errorf("image: cache: %w", err)
	}
	release := func() {
		if err := os.RemoveAll(d); err == nil {
			claim.Release()
		}
	}
	for _, s := range []string{"", "upper", "work", "mnt"} {
		if err := os.Mkdir(filepath.Join(d, s), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			release()
			return "", nil, fmt.Errorf("image: cache: %w", err)
		}
	}
	return d, release, nil
}

// markOpaque copies every opaque mark of the layer dir (trusted.*, which
// only root reads) to sandbox.UserOpaqueXattr and marks the layer's root
// sandbox.MarkedXattr, so that a sandbox run by another user can copy the
// layer (the sandbox's fallback without an overlay). Only root reads the
// trusted marks; others leave the layer as it is.
func markOpaque(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	v := make([]byte, 4)
	if n, err := unix.Lgetxattr(dir, sandbox.MarkedXattr, v); err == nil && string(v[:n]) == "1" {
		return nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if n, err := unix.Lgetxattr(p, opaqueXattr, v); err == nil && string(v[:n]) == "y" {
			return unix.Lsetxattr(p, sandbox.UserOpaqueXattr, []byte("y"), 0)
		}
		return nil
	})
	if err == nil {
		err = unix.Lsetxattr(dir, sandbox.MarkedXattr, []byte("1"), 0)
	}
	if err != nil {
		return fmt.Errorf("image: cache: marking %s for copies: %w (the cache's filesystem needs user extended attributes)", dir, err)
	}
	return nil
}
