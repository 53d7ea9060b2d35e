package kvevents

import (
	"maps"
	"slices"
	"strings"
)

// Detail is how much of a namespace's cache its events reveal. Events
// travel unauthenticated to whoever connects to the sockets, and a
// BlockStored's token_ids are the prompt itself to anyone with the
// model's tokenizer.
type Detail uint8

// The details, from most to least revealing.
const (
	// Full publishes vLLM's events as they are: block hashes, token_ids,
	// and lora_name "<model>:<namespace>". Routers that key blocks by
	// their tokens (llm-d's precise prefix-cache scorer) need it.
	Full Detail = iota
	// Hashes publishes each block's hash, parent and medium, with
	// token_ids an empty array and lora_name nil (lora_id stays, a
	// 31-bit hash of the namespace, so chains of two tenants stay
	// apart): what the replica caches and evicts shows, the text and the
	// tenant's name do not. The hashes are deterministic (see the
	// package documentation): a guessed prompt can be confirmed.
	Hashes
	// None publishes nothing of the namespace.
	None
)

var detailNames = [...]string{Full: "full", Hashes: "hashes", None: "none"}

// String returns the detail's name in a policy: full, hashes or none.
func (d Detail) String() string { return detailNames[d] }

// parseDetail reads a detail's name.
func parseDetail(s string) (Detail, bool) {
	i := slices.Index(detailNames[:], s)
	return Detail(i), i >= 0
}

// Policy chooses each namespace's Detail. The zero Policy publishes every
// namespace in full, as vLLM does.
type Policy struct {
	// Default is the detail of a namespace Namespaces does not list.
	Default Detail
	// Namespaces sets the detail of the namespaces it lists.
	Namespaces map[string]Detail
}

// For returns namespace ns's detail.
func (p Policy) For(ns string) Detail {
	if d, ok := p.Namespaces[ns]; ok {
		return d
	}
	return p.Default
}

// ParsePolicy reads a policy as the --kv-events-detail flag gives it:
// comma-separated entries, each a detail (full, hashes or none) for the
// namespaces not listed, given at most once, or namespace=detail. An
// empty string is the zero Policy.
// "hashes,acme=none" publishes no event of tenant acme and only hashes of
// every other.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	var sawDefault bool
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	for _, entry := range strings.Split(s, ",") {
		ns, name, named := strings.Cut(entry, "=")
		if !named {
			name = ns
		}
		ns, name = strings.TrimSpace(ns), strings.TrimSpace(name)
		d, ok := parseDetail(name)
		switch {
		case !ok:
			return Policy{}, errorf("detail %q in %q: want full, hashes or none", name, entry)
		case !named && sawDefault:
			return Policy{}, errorf("two details for the unlisted namespaces in %q", s)
		case !named:
			p.Default, sawDefault = d, true
			continue
		case ns == "":
			return Policy{}, errorf("entry %q names no namespace", entry)
		}
		if _, dup := p.Namespaces[ns]; dup {
			return Policy{}, errorf("namespace %q listed twice", ns)
		}
		if p.Namespaces == nil {
			p.Namespaces = map[string]Detail{}
		}
		p.Namespaces[ns] = d
	}
	return p, nil
}

// String writes the policy as ParsePolicy reads it: the default, then the
// listed namespaces in order.
func (p Policy) String() string {
	parts := []string{p.Default.String()}
	for _, ns := range slices.Sorted(maps.Keys(p.Namespaces)) {
		parts = append(parts, ns+"="+p.Namespaces[ns].String())
	}
	return strings.Join(parts, ",")
}
