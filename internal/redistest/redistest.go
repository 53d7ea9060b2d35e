// Package redistest starts a real redis-server for tests: on a loopback
// port, in a temporary directory, with no persistence, stopped when the
// test ends. Outside CI a missing redis-server skips the test; with
// PREFIXD_REQUIRE_REDIS=1 (CI, after scripts/redis.sh installs it) it fails
// the test instead.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RequireEnv, set to 1, makes a missing redis-server fail tests instead of
// skipping them.
const RequireEnv = "PREFIXD_REQUIRE_REDIS"

// Server is a redis-server process a test started.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// Start starts a redis-server for t, with extra configuration args
// ("--maxmemory", "1mb", ...), and stops it when t ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("redis-server is not installed and %s=1 (run scripts/redis.sh)", RequireEnv)
		}
		t.Skip("redis-server is not installed (scripts/redis.sh installs it)")
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: args}
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// freePort returns a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning"}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Dir = s.dir
	out, err := os.Create(s.dir + "/redis.log")
	if err != nil {
		s.t.Fatal(err)
	}
	defer out.Close()
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if s.ping() == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(s.dir + "/redis.log")
			s.Kill()
			s.t.Fatalf("redis-server did not answer on %s: %s", s.Addr(), log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping sends one PING by hand, so the helper needs no client. A server
// that asks for a password answers NOAUTH: it is up.
func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL, database db.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr(), db) }

// Kill stops the server at once (SIGKILL) and waits for it; its data is
// lost (there is no persistence). Killing a stopped server does nothing.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a killed server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}
