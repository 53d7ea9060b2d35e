package server

import "github.com/prefixd/prefixd/kvevents"

// servesModel reports whether a completion request of namespace ns may
// name model: the served model, or the namespace's own model name under
// which the KV events publish its blocks (kvevents.TenantModel), so that a
// prefix-aware router keyed on the request's model name scores a tenant's
// requests against that tenant's cached blocks only.
func (s *Server) servesModel(model, ns string) bool {
	return model == s.cfg.ModelName || ns != "" && model == kvevents.TenantModel(s.cfg.ModelName, ns)
}
