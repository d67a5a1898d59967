// Command gatewayd serves one embedded S3 gateway (package gateway) to
// every test binary of a machine, so that the test binaries need not link
// the gateway themselves: linking it into each of them cost more than
// their tests ran. testinfra.Main starts it when none answers and holds a
// shared lock on <dir>/users for as long as its test binary runs; the
// gateway stops, and removes its objects, once no test binary has held
// that lock for -idle.
//
// It writes the gateway's s3.Config as JSON to <dir>/gateway.json, then
// prints "ready" on standard output and closes it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/s3/gateway"
)

func main() {
	// Also the embedded gateway of t1 code run in a test binary
	// (testinfra sets embedded.Executable).
	gateway.ServeChild()
	dir := flag.String("dir", "", "state directory: lock, users, gateway.json and the objects under s3/")
	idle := flag.Duration("idle", 30*time.Second, "stop once no test binary has used the gateway for this long")
	flag.Parse()
	if err := serve(*dir, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "gatewayd:", err)
		os.Exit(1)
	}
}

func serve(dir string, idle time.Duration) error {
	if dir == "" {
		return errors.New("no -dir")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := filepath.Join(dir, "s3")
	// Objects of earlier test binaries are never read again.
	for _, d := range []string{data, filepath.Join(dir, ".s3-meta")} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	gw, err := gateway.Start(ctx, gateway.Options{Dir: data})
	if err != nil {
		return err
	}
	defer gw.Close()
	cfg, err := json.Marshal(gw.Config())
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "gateway.json.tmp")
	if err := os.WriteFile(tmp, cfg, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "gateway.json")); err != nil {
		return err
	}
	fmt.Println("ready")
	os.Stdout.Close()

	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	users, err := os.OpenFile(filepath.Join(dir, "users"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	unused := time.Time{}
	for range time.Tick(time.Second) {
		// Under the start lock no test binary is between finding this
		// gateway and taking its shared lock on users.
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			return err
		}
		if unix.Flock(int(users.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			unused = time.Time{}
		} else {
			if unused.IsZero() {
				unused = time.Now()
			}
			if time.Since(unused) >= idle {
				// The start lock is held until the process exits, so the
				// next test binary starts a new gateway only after this
				// one stopped.
				os.Remove(filepath.Join(dir, "gateway.json"))
				gw.Close()
				return os.RemoveAll(data)
			}
			unix.Flock(int(users.Fd()), unix.LOCK_UN)
		}
		unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	}
	return nil
}
