package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prefixd/prefixd/model"
	"github.com/prefixd/prefixd/remotetier"
	"github.com/prefixd/prefixd/server"
)

// remoteTierOptions are the flags of the cache tier replicas share.
type remoteTierOptions struct {
	url, ca   string
	ttl, wait time.Duration
}

func (r *remoteTierOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&r.url, "remote-tier", "", "Redis or Valkey store the replicas share their prefix cache through: redis://HOST:PORT/DB, or rediss:// for TLS; a password from the URL or $"+remotetier.PasswordEnv+"; empty: off")
	fs.DurationVar(&r.ttl, "remote-tier-ttl", time.Hour, "with --remote-tier: least time a block stays in the store (a block whose TTL runs longer stays until then)")
	fs.DurationVar(&r.wait, "remote-tier-lease-wait", 30*time.Second, "with --remote-tier: longest a request waits, without progress, for another replica computing the prefix blocks it misses (the fleet's lease); 0: no lease, every replica computes what it misses")
	fs.StringVar(&r.ca, "remote-tier-ca", "", "with a rediss:// --remote-tier: PEM file of the certificate authorities the store's certificate must chain to (default: the system's)")
}

func (r *remoteTierOptions) check() error {
	switch {
	case r.ttl <= 0:
		return usagef("--remote-tier-ttl must be positive, got %v", r.ttl)
	case r.wait < 0:
		return usagef("--remote-tier-lease-wait must not be negative, got %v", r.wait)
	case r.url == "" && r.ca != "":
		return usagef("--remote-tier-ca needs --remote-tier")
	case r.url == "":
		return nil
	}
	// Validate the URL now (a usage error), never quoting it: it may hold
	// a password.
	if err := remotetier.CheckURL(r.url, r.ca); err != nil {
		return usagef("--remote-tier: %v", err)
	}
	return nil
}

// start connects the remote tier, if configured, for a model whose K/V
// blocks take blockBytes, and registers its metrics. The store may be
// down: the tier then stages nothing and the breaker opens.
func (r *remoteTierOptions) start(o *serveOptions, m *model.Model, blockBytes int64, metrics *server.Metrics, log *slog.Logger) (*remotetier.Tier, error) {
	if r.url == "" {
		return nil, nil
	}
	fp, err := modelFingerprint(o, m, blockBytes)
	if err != nil {
		return nil, fmt.Errorf("remote tier: %w", err)
	}
	t, err := remotetier.New(remotetier.Config{URL: r.url, Password: os.Getenv(remotetier.PasswordEnv), CAFile: r.ca,
		Model: fp, BlockTokens: o.blockSize, BlockBytes: int(blockBytes), TTL: r.ttl,
		MaxLeaseWait: r.wait, NoLease: r.wait == 0, Log: log.With("component", "remote-tier")})
	if err != nil {
		return nil, err
	}
	metrics.Registry().MustRegister(t.Collector())
	log.Info("remote tier", "store", remotetier.Redacted(r.url), "ttl", r.ttl, "lease_wait", r.wait, "model_fingerprint", fmt.Sprintf("%x", fp[:8]))
	if err := t.Ping(context.Background()); err != nil {
		log.Warn(err.Error())
	}
	return t, nil
}
