package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"time"
)

// streamUsage is a stream's final token counts.
type streamUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// streamError is an error event's body.
type streamError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// streamPart is what the stream reader needs of one event: whether it
// carried output (timed for TTFT and ITL), the final usage, or an error.
type streamPart struct {
	token bool
	usage *streamUsage
	err   *streamError
}

// streamEvent is one /generate_stream event: a token (ID set) or the
// final event.
type streamEvent struct {
	ID           *int32       `json:"id"`
	FinishReason string       `json:"finish_reason"`
	Usage        *streamUsage `json:"usage"`
	Error        *streamError `json:"error"`
}

// generateBody is the /generate_stream request RunHTTP sends: token IDs,
// and EOS ignored so output lengths follow the workload.
type generateBody struct {
	PromptIDs []int32 `json:"prompt_ids"`
	MaxTokens int     `json:"max_tokens"`
	IgnoreEOS bool    `json:"ignore_eos"`
	BeamWidth int     `json:"beam_width,omitempty"`
}

// generate sends one /generate_stream request (a beam search of width
// beam, if not 0) and records its measurement. It returns the generated
// token IDs, the usage and whether the request succeeded.
func (r *httpRun) generate(ctx context.Context, prompt []int32, maxTokens, beam int) ([]int32, *streamUsage, bool) {
	var ids []int32
	usage, ok := r.stream(ctx, "/generate_stream", generateBody{prompt, maxTokens, true, beam}, func(data []byte) (streamPart, error) {
		var ev streamEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return streamPart{}, err
		}
		if ev.ID == nil {
			return streamPart{usage: ev.Usage, err: ev.Error}, nil
		}
		ids = append(ids, *ev.ID)
		return streamPart{token: true}, nil
	})
	return ids, usage, ok
}

// stream posts body to path, reads the server-sent events of its answer
// through decode, and records the request's measurement. It returns the
// final usage and whether the request succeeded.
func (r *httpRun) stream(ctx context.Context, path string, body any, decode func(data []byte) (streamPart, error)) (*streamUsage, bool) {
	b, err := json.Marshal(body)
	if err != nil {
		r.fail("encoding", time.Now())
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, r.c.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", r.base+path, bytes.NewReader(b))
	if err != nil {
		r.fail("encoding", time.Now())
		return nil, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if r.c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.c.APIKey)
	}
	start := time.Now()
	r.mu.Lock()
	r.res.Sent++
	if r.first.IsZero() {
		r.first = start
	}
	r.mu.Unlock()

	resp, err := r.client.Do(req)
	if err != nil {
		r.fail(transportError(ctx, err), time.Now())
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		r.fail(fmt.Sprintf("status %d", resp.StatusCode), time.Now())
		return nil, false
	}
	var (
		tokens int
		ttft   float64
		itl    []float64
		prev   time.Time
		usage  *streamUsage
	)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			r.fail(transportError(ctx, err), time.Now())
			return nil, false
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
		if !ok { // a comment or an event's end
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		now := time.Now()
		part, err := decode(data)
		if err != nil {
			r.fail("stream: malformed event", now)
			return nil, false
		}
		if part.err != nil {
			r.fail("stream: "+part.err.Type, now)
			return nil, false
		}
		if part.usage != nil {
			usage = part.usage
		}
		if !part.token {
			continue
		}
		if tokens == 0 {
			ttft = ms(now.Sub(start))
		} else {
			itl = append(itl, ms(now.Sub(prev)))
		}
		tokens++
		prev = now
	}
	end := time.Now()
	if usage == nil {
		r.fail("stream: no final event", end)
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &r.res
	res.Completed++
	res.PromptTokens += usage.PromptTokens
	res.CachedTokens += usage.CachedTokens
	res.GeneratedTokens += usage.CompletionTokens
	if tokens > 0 {
		r.ttft = append(r.ttft, ttft)
	}
	r.itl = append(r.itl, itl...)
	if end.After(r.last) {
		r.last = end
	}
	return usage, true
}

// transportError names a failure below HTTP.
func transportError(ctx context.Context, err error) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timeout"
	}
	if ctx.Err() != nil {
		return "cancelled"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "stream: cut"
	}
	return "transport"
}

// fail counts a failed request under key.
func (r *httpRun) fail(key string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Failed++
	r.res.Errors[key]++
	if at.After(r.last) {
		r.last = at
	}
}

// cacheStats is the part of GET /v1/cache a run reads.
type cacheStats struct {
	Blocks        ServerBlocks `json:"blocks"`
	Running       int          `json:"running"`
	Waiting       int          `json:"waiting"`
	PrefillTokens uint64       `json:"prefill_tokens"`
	KVEfficiency  float64      `json:"kv_memory_efficiency"`
}

// idleBlocks waits until the server runs and queues nothing, then returns
// its block accounting.
func (r *httpRun) idleBlocks(ctx context.Context) (*ServerBlocks, error) {
	ctx, cancel := context.WithTimeout(ctx, drainCheckTimeout)
	defer cancel()
	for {
		st, err := r.cacheStats(ctx)
		if err != nil {
			return nil, err
		}
		if st.Running == 0 && st.Waiting == 0 {
			return &st.Blocks, nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("bench: the server still ran %d and queued %d requests %v after the run", st.Running, st.Waiting, drainCheckTimeout)
		}
	}
}

func (r *httpRun) cacheStats(ctx context.Context) (*cacheStats, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", r.base+"/v1/cache", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+r.c.AdminToken)
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: GET /v1/cache: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("bench: GET /v1/cache: %w", err)
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("bench: GET /v1/cache answered %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var st cacheStats
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("bench: GET /v1/cache: %w", err)
	}
	return &st, nil
}

// WriteText prints the result as the figures `prefixd bench --http`
// reports.
func (r *HTTPResult) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "workload %s against %s", r.Workload, r.URL)
	if r.ChatAPI {
		b.WriteString(" through /v1/chat/completions")
	}
	if r.Rate > 0 {
		fmt.Fprintf(&b, ", %g arrivals/s", r.Rate)
	}
	if r.Soak > 0 {
		fmt.Fprintf(&b, ", soak %gs", r.Soak)
	}
	fmt.Fprintf(&b, "\nrequests   %d sent, %d completed, %d failed, %d delayed by the in-flight bound, in %.2f s\n",
		r.Sent, r.Completed, r.Failed, r.Delayed, r.Seconds)
	fmt.Fprintf(&b, "throughput %.1f tok/s, %.2f req/s\n", r.TokensPerSec, r.RequestsPerSec)
	fmt.Fprintf(&b, "TTFT       p50 %.1f ms, p99 %.1f ms\n", r.TTFTp50, r.TTFTp99)
	fmt.Fprintf(&b, "ITL        p50 %.2f ms, p99 %.2f ms\n", r.ITLp50, r.ITLp99)
	fmt.Fprintf(&b, "cache      hit rate %.1f%% (%d of %d prompt tokens), %d tokens generated\n",
		100*r.HitRate, r.CachedTokens, r.PromptTokens, r.GeneratedTokens)
	if len(r.Turns) > 0 {
		b.WriteString("turns     ")
		for k, t := range r.Turns {
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %d: %.1f%% of %d", k+1, 100*t.HitRate(), t.PromptTokens)
		}
		b.WriteString(" prompt tokens cached\n")
	}
	if len(r.Errors) > 0 {
		b.WriteString("errors    ")
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			fmt.Fprintf(&b, " %s: %d", k, r.Errors[k])
		}
		b.WriteString("\n")
	}
	if s := r.Server; s != nil {
		fmt.Fprintf(&b, "server     %d prompt tokens computed, peak %d running, KV efficiency %.1f%% (%d samples)\n",
			s.PrefillTokens, s.PeakRunning, 100*s.KVEfficiency, s.Samples)
	}
	if bl := r.Blocks; bl != nil {
		fmt.Fprintf(&b, "blocks     %d total, %d free, %d cached idle, %d in use after draining\n", bl.Total, bl.Free, bl.CachedIdle, bl.InUse)
	}
	_, err := w.Write(b.Bytes())
	return err
}
