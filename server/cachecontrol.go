package server

import (
	"encoding/json"
	"time"

	"github.com/prefixd/prefixd/chat"
	"github.com/prefixd/prefixd/engine"
)

// cacheMark is an Anthropic-style breakpoint, a content part's
// "cache_control": {"type": "ephemeral", "ttl": "5m" | "1h"}: keep the
// prompt up to the end of the part for ttl.
type cacheMark struct {
	msg   int           // the message's index
	end   int           // bytes of the message's content up to the part's end
	ttl   time.Duration // 5 minutes or an hour
	param string        // messages[i].content[j].cache_control, for errors
}

// cacheControlTTLs are the TTLs a cache_control may ask for, as
// Anthropic's API has them; none means 5 minutes.
var cacheControlTTLs = map[string]time.Duration{"5m": 5 * time.Minute, "1h": time.Hour}

// parseCacheControl reads a content part's cache_control object.
func parseCacheControl(raw json.RawMessage, param string) (time.Duration, *apiError) {
	var cc struct {
		Type *string `json:"type"`
		TTL  *string `json:"ttl"`
	}
	if err := decodeStrict(raw, &cc); err != nil {
		return 0, badRequest(param, `%s must be an object {"type": "ephemeral", "ttl": "5m" or "1h"}: %s`, param, err.Message)
	}
	if cc.Type == nil || *cc.Type != "ephemeral" {
		return 0, badRequest(param, `%s.type must be "ephemeral"`, param)
	}
	if cc.TTL == nil {
		return cacheControlTTLs["5m"], nil
	}
	ttl, ok := cacheControlTTLs[*cc.TTL]
	if !ok {
		return 0, badRequest(param, `%s.ttl must be "5m" or "1h", got %.16q`, param, *cc.TTL)
	}
	return ttl, nil
}

// checkMarks enforces Anthropic's contract on a conversation's
// breakpoints: at most engine.MaxBreakpoints, and a longer TTL never after
// a shorter one. The error names the offending part.
func checkMarks(marks []cacheMark) *apiError {
	for i, mk := range marks {
		switch {
		case i == engine.MaxBreakpoints:
			return badRequest(mk.param, "at most %d content parts may have cache_control, this is the %dth", engine.MaxBreakpoints, i+1)
		case i > 0 && mk.ttl > marks[i-1].ttl:
			return badRequest(mk.param, "a cache_control ttl of %v follows one of %v (%s): longer TTLs must come first",
				mk.ttl, marks[i-1].ttl, marks[i-1].param)
		}
	}
	return nil
}

// breakpoints turns a conversation's marks into the engine's breakpoints
// on ids, the prompt rendered from msgs: a mark's position is where the
// prompt stops agreeing with the conversation rendered up to the mark's
// part, its last message cut there, without the generation prompt (the
// template ends that message as it would a whole one). Whatever the
// template does with contents, a breakpoint covers only tokens the full
// prompt starts with. A mark that covers no more than the one before it
// adds nothing, and is dropped, as is one the template cannot render the
// cut conversation for (a template may refuse a conversation without a
// user turn): the request is served all the same. TTLs are cut to the
// maximum TTL.
func (s *Server) breakpoints(in chat.Input, marks []cacheMark, ids []int32, lim limits) []engine.Breakpoint {
	var out []engine.Breakpoint
	msgs := in.Messages
	cut := make([]chat.Message, 0, len(msgs))
	for _, mk := range marks {
		cut = append(cut[:0], msgs[:mk.msg]...)
		last := msgs[mk.msg]
		last.Content = last.Content[:mk.end]
		part := chat.Input{Messages: append(cut, last), Vars: in.Vars}
		if in.MessageFields != nil { // tool calls and results render as in the full prompt
			part.MessageFields = in.MessageFields[:mk.msg+1]
		}
		prefix, err := s.renderChat(part, false, "messages")
		if err != nil {
			continue
		}
		n := 0
		for n < len(prefix) && n < len(ids) && prefix[n] == ids[n] {
			n++
		}
		if n == 0 || (len(out) > 0 && n <= out[len(out)-1].Tokens) {
			continue
		}
		out = append(out, engine.Breakpoint{Tokens: n, TTL: min(mk.ttl, lim.maxTTL)})
	}
	return out
}
