package embedded_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/infra/s3/embedded"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/store"
)

// helperEnv makes the test binary a parent that starts a gateway, prints
// its endpoint and waits to be killed.
const helperEnv = "T1_EMBEDDED_TEST_PARENT"

func TestMain(m *testing.M) {
	if dir, ok := os.LookupEnv(helperEnv); ok {
		embedded.Executable = testinfra.Gatewayd
		gw, err := embedded.Start(context.Background(), embedded.Options{Dir: dir})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(gw.Endpoint())
		select {}
	}
	os.Exit(testinfra.Run(m))
}

// The gateway serves objects as files under Dir from a process of its
// own: the parent's working directory stays where it was (an in-process
// gateway makes Dir the working directory), and Close ends the process.
func TestServesFromAProcessOfItsOwn(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "s3")
	gw, err := embedded.Start(t.Context(), embedded.Options{Dir: dir, Bucket: "b-test"})
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := os.Getwd(); now != wd {
		t.Errorf("working directory moved to %s", now)
	}
	s, err := s3.Open(t.Context(), gw.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "a/b.txt", strings.NewReader("hello"), 5, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "b-test", "a", "b.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("object as a file: %q, %v", b, err)
	}
	if _, err := os.Stat(embedded.CredentialsPath(dir)); err != nil {
		t.Errorf("credentials: %v", err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", gw.Endpoint(), time.Second); err == nil {
		c.Close()
		t.Fatal("the gateway still answers after Close")
	}
}

// A parent killed with SIGKILL, which runs no Close, takes its gateway
// with it: the gateway stops once its lifeline reads end of file.
func TestGatewayEndsWithItsParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+filepath.Join(t.TempDir(), "s3"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.HasPrefix(line, "error:") {
		_ = cmd.Process.Kill()
		t.Fatalf("parent: %q, %v", line, err)
	}
	endpoint := strings.TrimSpace(line)
	if c, err := net.DialTimeout("tcp", endpoint, time.Second); err != nil {
		t.Fatalf("gateway at %s: %v", endpoint, err)
	} else {
		c.Close()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", endpoint, time.Second)
		if err != nil {
			return
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the gateway at %s still answers 20 s after its parent was killed", endpoint)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A gateway that cannot start says why, and no process is left.
func TestStartFailureSaysWhy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := embedded.Start(t.Context(), embedded.Options{Dir: file})
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("got %v, want an error naming %s", err, file)
	}
	if !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("no reason given: %v", err)
	}
}

// A test binary that names no executable is told so, rather than
// starting itself again and running its own tests.
func TestTestBinaryNeedsAnExecutable(t *testing.T) {
	saved := embedded.Executable
	embedded.Executable = nil
	defer func() { embedded.Executable = saved }()
	_, err := embedded.Start(t.Context(), embedded.Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "embedded.Executable") {
		t.Fatalf("got %v", err)
	}
	embedded.Executable = func() (string, error) { return "", errors.New("none here") }
	if _, err := embedded.Start(t.Context(), embedded.Options{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "none here") {
		t.Fatalf("got %v", err)
	}
}
