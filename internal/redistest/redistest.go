// Package redistest starts a real redis-server for tests: on a loopback
// port, in a temporary directory, with no persistence, stopped when the
// test ends. Outside CI a missing redis-server skips the test; with
// PREFIXD_REQUIRE_REDIS=1 (CI, after scripts/redis.sh installs it) it fails
// the test instead. PREFIXD_REDIS_SERVER=valkey-server runs Valkey instead.
package redistest

import (
	"bufio"
	"crypto/tls"
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

// ServerEnv names another server binary to start instead of redis-server,
// one that takes redis-server's arguments: valkey-server, to run the
// tests on Valkey.
const ServerEnv = "PREFIXD_REDIS_SERVER"

// Server is a redis-server process a test started.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	port    int
	args    []string
	cmd     *exec.Cmd
	tls     *tls.Config // the client side of a server that speaks only TLS, on port
	tlsArgs []string    // its certificate arguments
}

// Start starts a redis-server for t, with extra configuration args
// ("--maxmemory", "1mb", ...), and stops it when t ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	s := newServer(t, args)
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// StartTLS starts a redis-server for t that speaks only TLS, with the
// server certificate of c (clients need not present one), and stops it
// when t ends. Its URL is rediss://.
func StartTLS(t testing.TB, c Certs, args ...string) *Server {
	t.Helper()
	s := newServer(t, args)
	s.tlsArgs = []string{"--tls-cert-file", c.CertFile, "--tls-key-file", c.KeyFile,
		"--tls-ca-cert-file", c.CAFile, "--tls-auth-clients", "no"}
	s.tls = c.ClientConfig(t)
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// newServer finds redis-server (skipping t, or failing it under
// RequireEnv, without one) and a port.
func newServer(t testing.TB, args []string) *Server {
	t.Helper()
	name := "redis-server"
	if v := os.Getenv(ServerEnv); v != "" {
		name = v
	}
	bin, err := exec.LookPath(name)
	if err != nil {
		switch {
		case name != "redis-server":
			t.Fatalf("%s=%s is not on PATH", ServerEnv, name)
		case os.Getenv(RequireEnv) == "1":
			t.Fatalf("redis-server is not installed and %s=1 (run scripts/redis.sh)", RequireEnv)
		}
		t.Skip("redis-server is not installed (scripts/redis.sh installs it)")
	}
	return &Server{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: args}
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
	ports := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		ports = append([]string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}, s.tlsArgs...)
	}
	args := append(append(ports, "--bind", "127.0.0.1", "--dir", s.dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning"), s.args...)
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
	d := &net.Dialer{Timeout: time.Second}
	var c net.Conn
	var err error
	if s.tls != nil {
		c, err = tls.DialWithDialer(d, "tcp", s.Addr(), s.tls)
	} else {
		c, err = d.Dial("tcp", s.Addr())
	}
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

// Addr is the server's host:port (its TLS port, for StartTLS).
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is the server's redis:// URL (rediss:// for StartTLS), database db.
func (s *Server) URL(db int) string {
	scheme := "redis"
	if s.tls != nil {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s://%s/%d", scheme, s.Addr(), db)
}

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
