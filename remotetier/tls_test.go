package remotetier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/internal/redistest"
)

// TestTLS: over rediss:// with the CA file that signed the store's
// certificate, replicas share blocks as over redis://; with another CA (or
// the system's) the handshake fails: Ping says so in words that name the
// flag, every fetch misses, and the errors are counted as tls.
func TestTLS(t *testing.T) {
	certs := redistest.NewCerts(t)
	s := redistest.StartTLS(t, certs)
	if !strings.HasPrefix(s.URL(0), "rediss://") {
		t.Fatalf("URL %s", s.URL(0))
	}
	withCA := func(ca string) func(*Config) { return func(c *Config) { c.CAFile = ca } }
	a, b := newTier(t, s.URL(0), withCA(certs.CAFile)), newTier(t, s.URL(0), withCA(certs.CAFile))
	if err := a.Ping(bg); err != nil {
		t.Fatal(err)
	}
	ns, tokens := "acme", prompt(1, 4)
	fps := putPrompt(t, a, ns, tokens)
	if n := fetched(b, ns, tokens, 0); n != 4 {
		t.Fatalf("fetched %d blocks over TLS, want 4", n)
	}
	checkStaged(t, b, ns, tokens, fps, 4)

	for name, ca := range map[string]string{"another CA": redistest.NewCerts(t).CAFile, "the system's CAs": ""} {
		c := newTier(t, s.URL(0), withCA(ca))
		err := c.Ping(bg)
		if err == nil || !strings.Contains(err.Error(), "TLS handshake") || !strings.Contains(err.Error(), "--remote-tier-ca") {
			t.Fatalf("%s: Ping said %v", name, err)
		}
		if n := fetched(c, ns, tokens, 0); n != 0 {
			t.Fatalf("%s: fetched %d blocks", name, n)
		}
		if st := c.Stats(); st.Errors.TLS != 1 || st.HitTokens != 0 {
			t.Fatalf("%s: stats %+v, want one tls error", name, st)
		}
	}
}

// TestCAFileChecked: a CA file needs a rediss:// URL, must exist and must
// hold a PEM certificate; each error says which.
func TestCAFileChecked(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := redistest.NewCerts(t).CAFile
	for _, c := range []struct{ url, ca, want string }{
		{"redis://127.0.0.1:6379/0", good, "needs a rediss:// URL"},
		{"rediss://127.0.0.1:6379/0", filepath.Join(dir, "missing.pem"), "reading the CA file"},
		{"rediss://127.0.0.1:6379/0", notPEM, "holds no PEM certificate"},
	} {
		err := CheckURL(c.url, c.ca)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %s: %v, want %q", c.url, c.ca, err, c.want)
		}
	}
	if err := CheckURL("rediss://:s3cret@127.0.0.1:6379/0", good); err != nil {
		t.Fatal(err)
	}
}
