package main

import (
	"flag"
	"log/slog"
	"maps"
	"slices"

	"github.com/prefixd/prefixd/kvevents"
)

// kvEventsOptions are the flags of the KV cache event publisher.
type kvEventsOptions struct {
	endpoint, replay, podID string
	buffer                  int
	detail                  string
	policy                  kvevents.Policy // parsed from detail by check
}

func (k *kvEventsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&k.endpoint, "kv-events-endpoint", "", "publish vLLM-format KV cache events on this ZeroMQ PUB endpoint, e.g. tcp://*:5557 (llm-d dials pods on 5557); empty: off")
	fs.StringVar(&k.replay, "kv-events-replay-endpoint", "", "with --kv-events-endpoint: ZeroMQ ROUTER endpoint replaying recent events to subscribers that missed them, e.g. tcp://*:5558")
	fs.StringVar(&k.podID, "kv-events-pod-id", "", "with --kv-events-endpoint: this replica's name in the topic kv@<pod-id>@<model>; llm-d expects <pod-ip>:<port>")
	fs.IntVar(&k.buffer, "kv-events-buffer", 10000, "with --kv-events-endpoint: recent event messages kept for replay")
	fs.StringVar(&k.detail, "kv-events-detail", "full", "with --kv-events-endpoint: what each namespace's events reveal to the unauthenticated subscribers: full (token ids and tenant name, as vLLM; llm-d's precise scorer needs them), hashes (block hashes only) or none; a bare value sets the default, namespace=value entries override it, e.g. hashes,acme=none")
}

func (k *kvEventsOptions) check() error {
	switch {
	case k.buffer <= 0:
		return usagef("--kv-events-buffer %d must be positive", k.buffer)
	case k.endpoint == "" && (k.replay != "" || k.podID != ""):
		return usagef("--kv-events-replay-endpoint and --kv-events-pod-id need --kv-events-endpoint")
	case k.endpoint != "" && k.podID == "":
		return usagef("--kv-events-endpoint needs --kv-events-pod-id (in Kubernetes: $(POD_IP):<port>)")
	case k.endpoint == "" && k.detail != "full":
		return usagef("--kv-events-detail needs --kv-events-endpoint")
	}
	p, err := kvevents.ParsePolicy(k.detail)
	if err != nil {
		return usagef("--kv-events-detail: %w", err)
	}
	k.policy = p
	return nil
}

// checkNamespaces refuses a --kv-events-detail entry for a namespace no
// API key maps to (keys maps keys to namespaces): a misspelt tenant would
// otherwise keep the default detail without a word.
func (k *kvEventsOptions) checkNamespaces(keys map[string]string) error {
	tenants := map[string]bool{}
	for _, ns := range keys {
		tenants[ns] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(k.policy.Namespaces)) {
		if !tenants[ns] {
			return usagef("--kv-events-detail names namespace %q, which no --api-keys key maps to", ns)
		}
	}
	return nil
}

// start binds the publisher's sockets, or returns nil when events are off.
// The caller closes it after the engine.
func (k *kvEventsOptions) start(model string, blockSize int, log *slog.Logger) (*kvevents.Publisher, error) {
	if k.endpoint == "" {
		return nil, nil
	}
	p, err := kvevents.New(kvevents.Config{Endpoint: k.endpoint, ReplayEndpoint: k.replay, PodID: k.podID,
		Model: model, BlockSize: blockSize, Buffer: k.buffer, Policy: k.policy})
	if err != nil {
		return nil, err
	}
	log.Info("kv events", "endpoint", p.Addr(), "replay", p.ReplayAddr(), "topic", kvevents.Topic(k.podID, model), "detail", k.policy.String())
	return p, nil
}
