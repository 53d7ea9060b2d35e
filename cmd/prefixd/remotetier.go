package main

import (
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
	url string
	ttl time.Duration
}

func (r *remoteTierOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&r.url, "remote-tier", "", "Redis or Valkey store the replicas share their prefix cache through: redis://HOST:PORT/DB, or rediss:// for TLS; a password from the URL or $"+remotetier.PasswordEnv+"; empty: off")
	fs.DurationVar(&r.ttl, "remote-tier-ttl", time.Hour, "with --remote-tier: least time a block stays in the store (a block whose TTL runs longer stays until then)")
}

func (r *remoteTierOptions) check() error {
	switch {
	case r.ttl <= 0:
		return usagef("--remote-tier-ttl must be positive, got %v", r.ttl)
	case r.url == "":
		return nil
	}
	// Validate the URL now (a usage error), never quoting it: it may hold
	// a password.
	if err := remotetier.CheckURL(r.url); err != nil {
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
	t, err := remotetier.New(remotetier.Config{URL: r.url, Password: os.Getenv(remotetier.PasswordEnv), Model: fp,
		BlockTokens: o.blockSize, BlockBytes: int(blockBytes), TTL: r.ttl, Log: log.With("component", "remote-tier")})
	if err != nil {
		return nil, err
	}
	metrics.Registry().MustRegister(t.Collector())
	log.Info("remote tier", "store", remotetier.Redacted(r.url), "ttl", r.ttl, "model_fingerprint", fmt.Sprintf("%x", fp[:8]))
	return t, nil
}
