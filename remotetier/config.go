package remotetier

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prefixd/prefixd/clock"
	"github.com/prefixd/prefixd/disktier"
)

// PasswordEnv names the environment variable that holds the store's
// password when the URL carries none, so it need not appear on a command
// line.
const PasswordEnv = "PREFIXD_REMOTE_TIER_PASSWORD"

// Config configures a Tier.
type Config struct {
	// URL is the store: redis://[user:password@]host:port/db, or rediss://
	// for TLS. The password never appears in logs or errors. Required.
	URL string
	// Password, if set, is used when the URL carries none (serve fills it
	// from PasswordEnv).
	Password string
	// CAFile, with a rediss:// URL, is a PEM file of the certificate
	// authorities the store's certificate must chain to; default the
	// system's.
	CAFile string
	// Model is the fingerprint blocks are written under and the only one
	// read back (it names the K/V element type and layout; see
	// disktier.ModelFingerprint). Required (not all zero).
	Model disktier.ModelFingerprint
	// BlockTokens and BlockBytes are one block's tokens and K/V bytes: a
	// fetched value of another size is rejected. Required.
	BlockTokens, BlockBytes int
	// TTL is the least time a block stays in the store after it is
	// written; a block whose own TTL deadline is later stays until then.
	// Default one hour.
	TTL time.Duration
	// QueueBlocks bounds the blocks waiting to be written; a Put beyond it
	// is dropped and counted. Default 64.
	QueueBlocks int
	// StageBytes bounds the K/V bytes fetched and not yet promoted into the
	// device pool; the oldest are dropped beyond it. Default 512 MiB.
	StageBytes int64
	// MaxFetchWait bounds one round trip of a fetch's lookup or a lease:
	// past it the request recomputes. Default one second. A lookup is also
	// cut at the estimated time to recompute its tokens, and a transfer
	// only there (until that is measured, at MaxFetchWait plus its bytes
	// at 25 MB/s).
	MaxFetchWait time.Duration
	// MaxLeaseWait bounds how long a fetch waits, without the chain in
	// the store growing, for another replica that holds the lease on
	// computing the blocks it misses. Default 30 seconds.
	MaxLeaseWait time.Duration
	// LeaseTTL is how long a lease outlives its holder: the holder renews
	// its leases every third of it. Default 3 seconds.
	LeaseTTL time.Duration
	// NoLease turns the lease off: a replica that misses blocks computes
	// them even while another is computing them.
	NoLease bool
	// WriteTimeout bounds one pipeline of writes. Default two seconds.
	WriteTimeout time.Duration
	// BreakerFailures is the failures in a row that open the circuit
	// breaker (default 3); BreakerBackoff its first backoff (default
	// 500 ms), doubled by every failed probe up to BreakerMaxBackoff
	// (default 30 s).
	BreakerFailures                   int
	BreakerBackoff, BreakerMaxBackoff time.Duration
	// Clock must be the cache's (the times in blocks are on it); default
	// the system clock. The breaker runs on it too.
	Clock clock.Clock
	// Log receives the tier's warnings (never a password, a prompt or a
	// block's tokens); default none.
	Log *slog.Logger
}

// fill validates cfg and applies the defaults.
func (cfg *Config) fill() error {
	switch {
	case cfg.URL == "":
		return errors.New("remotetier: Config.URL is required")
	case cfg.Model == disktier.ModelFingerprint{}:
		return errors.New("remotetier: Config.Model is required")
	case cfg.BlockTokens <= 0 || cfg.BlockBytes <= 0:
		return fmt.Errorf("remotetier: Config.BlockTokens (%d) and BlockBytes (%d) must be positive", cfg.BlockTokens, cfg.BlockBytes)
	case cfg.TTL < 0 || cfg.QueueBlocks < 0 || cfg.StageBytes < 0 || cfg.MaxFetchWait < 0 || cfg.MaxLeaseWait < 0 || cfg.LeaseTTL < 0 || cfg.WriteTimeout < 0 ||
		cfg.BreakerFailures < 0 || cfg.BreakerBackoff < 0 || cfg.BreakerMaxBackoff < 0:
		return errors.New("remotetier: Config's TTL, QueueBlocks, StageBytes, MaxFetchWait, MaxLeaseWait, LeaseTTL, WriteTimeout and Breaker fields must not be negative")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.TTL, time.Hour)
	def(&cfg.MaxFetchWait, time.Second)
	def(&cfg.MaxLeaseWait, 30*time.Second)
	def(&cfg.LeaseTTL, 3*time.Second)
	def(&cfg.WriteTimeout, 2*time.Second)
	def(&cfg.BreakerBackoff, 500*time.Millisecond)
	def(&cfg.BreakerMaxBackoff, 30*time.Second)
	if cfg.QueueBlocks == 0 {
		cfg.QueueBlocks = 64
	}
	if cfg.StageBytes == 0 {
		cfg.StageBytes = 512 << 20
	}
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = 3
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// clientOptions parses cfg.URL into the client's options. Its errors
// never quote the URL, which may hold a password.
func (cfg *Config) clientOptions() (*redis.Options, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, errors.New("remotetier: the URL must be redis://[user:password@]host:port/db or rediss://...")
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		// go-redis's messages name a bad part (the db, an option), not
		// the password; still, say only which URL part is wrong.
		return nil, fmt.Errorf("remotetier: the URL of %s is not valid (%s)", Redacted(cfg.URL), errorKind(err))
	}
	if opt.Password == "" {
		opt.Password = cfg.Password
	}
	if u.Scheme == "rediss" && opt.TLSConfig == nil {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	}
	if cfg.CAFile != "" {
		if opt.TLSConfig == nil {
			return nil, errors.New("remotetier: Config.CAFile (--remote-tier-ca) needs a rediss:// URL")
		}
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("remotetier: reading the CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("remotetier: the CA file %s holds no PEM certificate", cfg.CAFile)
		}
		opt.TLSConfig.RootCAs = pool
	}
	opt.MaxRetries = -1 // the breaker, not the client, decides when to try again
	opt.DialerRetries = 1
	opt.DialTimeout = min(cfg.MaxFetchWait, time.Second)
	opt.ContextTimeoutEnabled = true
	opt.PoolSize = 8
	opt.Protocol = 2 // RESP2: Redis 7 and Valkey both speak it, and no HELLO round trip
	opt.DisableIdentity = true
	return opt, nil
}

// CheckURL reports whether raw is a URL the tier accepts, with caFile (if
// not empty) as its Config.CAFile, with an error that never quotes raw.
func CheckURL(raw, caFile string) error {
	_, err := (&Config{URL: raw, CAFile: caFile}).clientOptions()
	return err
}

// Redacted returns the URL's scheme, host and path: what a log may show.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
