package server

import "github.com/valyala/fasthttp"

// BuildVersion describes the running build; GET /version answers it, as
// vLLM's /version does ({"version": "..."}), with the VCS fields beside.
type BuildVersion struct {
	// Version is the module version, "(devel)" for a build from a source
	// tree; empty reports "unknown".
	Version string `json:"version"`
	// Revision is the VCS revision the build came from, if recorded.
	Revision string `json:"revision,omitempty"`
	// Modified says the source tree had local changes at build time.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built it.
	GoVersion string `json:"go_version,omitempty"`
}

// handleVersion answers GET /version. It needs no key, as /healthz: a
// client checks what it talks to before it has anything to send.
func (s *Server) handleVersion(ctx *fasthttp.RequestCtx) {
	v := s.cfg.Version
	if v.Version == "" {
		v.Version = "unknown"
	}
	s.writeJSON(ctx, 200, v)
}
