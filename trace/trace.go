// Package trace records and replays prefixd's request arrivals, for tuning
// the prefix cache offline (`prefixd ttl-sim`).
//
// # Format
//
// A trace is UTF-8 text with one JSON object per line (JSON Lines). Blank
// lines and lines starting with '#' are ignored. Each object is one request,
// in arrival order, with these fields:
//
//	t_ms         integer, required: arrival time in milliseconds since the
//	             trace started (non-decreasing down the file)
//	ns           string: the tenant namespace ("" if none)
//	tokens       array of integers: the prompt's token IDs
//	blocks       array of strings: instead of tokens, the chained block
//	             hashes of the prompt's whole blocks (16 hex digits each,
//	             see BlockHashes), so a trace can be kept without the text
//	block_size   integer: the block size the hashes were taken with
//	             (required with blocks)
//	prompt_tokens integer: the prompt's length in tokens (required with
//	             blocks; the partial last block has no hash)
//	ttl_ms       integer: the cache TTL the request asked for; 0 or absent
//	             means the server's default
//	priority     integer: the cache priority the request asked for
//	cache_off    boolean: the request neither read nor wrote the cache
//	max_tokens   integer, required: the request's max_tokens
//	output_tokens integer: tokens actually generated, if known
//
// A record carries tokens or blocks, not both. Example:
//
//	{"t_ms":0,"ns":"acme","tokens":[1,72,101],"max_tokens":64}
//	{"t_ms":1250,"ns":"acme","blocks":["3f0c9a1b2c3d4e5f"],"block_size":16,"prompt_tokens":20,"max_tokens":64,"output_tokens":31}
//
// Unknown fields are ignored, so later versions may add some.
package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/prefixd/prefixd/kvcache"
)

// Record is one request of a trace. See the package documentation for the
// meaning of each field in the file.
type Record struct {
	At           int64    `json:"t_ms"`
	Namespace    string   `json:"ns,omitempty"`
	Tokens       []int32  `json:"tokens,omitempty"`
	Blocks       []string `json:"blocks,omitempty"`
	BlockSize    int      `json:"block_size,omitempty"`
	PromptTokens int      `json:"prompt_tokens,omitempty"`
	TTLms        int64    `json:"ttl_ms,omitempty"`
	Priority     int32    `json:"priority,omitempty"`
	CacheOff     bool     `json:"cache_off,omitempty"`
	MaxTokens    int      `json:"max_tokens"`
	OutputTokens int      `json:"output_tokens,omitempty"`
}

// Arrival returns the record's arrival time since the trace started.
func (r *Record) Arrival() time.Duration { return time.Duration(r.At) * time.Millisecond }

// TTL returns the requested cache TTL, 0 for the default.
func (r *Record) TTL() time.Duration { return time.Duration(r.TTLms) * time.Millisecond }

// Prompt returns the prompt's length in tokens.
func (r *Record) Prompt() int {
	if len(r.Tokens) > 0 {
		return len(r.Tokens)
	}
	return r.PromptTokens
}

// MaxTokens bounds a record's prompt_tokens, max_tokens, output_tokens and
// block_size, so that a bad line cannot make a replay allocate without
// limit: 2^24 tokens is far beyond any model's context.
const MaxTokens = 1 << 24

// Validate reports the first thing wrong with r.
func (r *Record) Validate() error {
	switch {
	case r.MaxTokens > MaxTokens || r.PromptTokens > MaxTokens || r.OutputTokens > MaxTokens ||
		r.BlockSize > MaxTokens || len(r.Tokens) > MaxTokens || len(r.Blocks) > MaxTokens:
		return fmt.Errorf("a record's token counts are bounded by %d", MaxTokens)
	case r.At < 0:
		return fmt.Errorf("t_ms %d is negative", r.At)
	case r.MaxTokens <= 0:
		return fmt.Errorf("max_tokens must be positive, got %d", r.MaxTokens)
	case r.TTLms < 0:
		return fmt.Errorf("ttl_ms %d is negative", r.TTLms)
	case r.OutputTokens < 0:
		return fmt.Errorf("output_tokens %d is negative", r.OutputTokens)
	case len(r.Tokens) > 0 && len(r.Blocks) > 0:
		return errors.New("a record carries tokens or blocks, not both")
	case len(r.Tokens) == 0 && len(r.Blocks) == 0 && r.PromptTokens <= 0:
		return errors.New("a record needs tokens, or blocks with prompt_tokens")
	}
	if len(r.Blocks) > 0 {
		switch {
		case r.BlockSize <= 0:
			return errors.New("blocks need a positive block_size")
		case r.PromptTokens < len(r.Blocks)*r.BlockSize:
			return fmt.Errorf("prompt_tokens %d is shorter than %d blocks of %d", r.PromptTokens, len(r.Blocks), r.BlockSize)
		}
		for _, b := range r.Blocks {
			if _, err := strconv.ParseUint(b, 16, 64); err != nil || len(b) != 16 {
				return fmt.Errorf("block hash %q is not 16 hex digits", b)
			}
		}
	}
	return nil
}

// BlockHashes returns the hashes of the whole blocks of tokens in namespace
// ns as the blocks field writes them: the low half of the fingerprint chain
// that the cache keys its blocks by (kvcache.AppendChain), in hex.
func BlockHashes(ns string, tokens []int32, blockSize int) []string {
	fps := kvcache.AppendChain(nil, kvcache.Fingerprint{}, kvcache.NamespaceSalt(ns), tokens, blockSize)
	out := make([]string, len(fps))
	for i, fp := range fps {
		out[i] = fmt.Sprintf("%016x", fp.Lo)
	}
	return out
}

// Writer appends records to a trace. It is safe for concurrent use; each
// record is written with one Write call on the underlying writer, so lines
// never interleave.
type Writer struct {
	start time.Time
	mu    sync.Mutex
	w     io.Writer
	buf   bytes.Buffer
	last  int64
	err   error
}

// NewWriter returns a Writer whose trace starts at start: Record.At counts
// from there (see Since).
func NewWriter(w io.Writer, start time.Time) *Writer {
	return &Writer{w: w, start: start}
}

// Since returns t as a record's t_ms: milliseconds since the trace start,
// never negative.
func (w *Writer) Since(t time.Time) int64 { return max(0, t.Sub(w.start).Milliseconds()) }

// Write validates r and appends it as one line. Concurrent callers may
// take their arrival times in one order and reach Write in another, so a
// record earlier than the one before it is written with that one's t_ms:
// the file stays in arrival order. After a write error every later Write
// returns that error.
func (w *Writer) Write(r Record) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	r.At = max(r.At, w.last)
	w.last = r.At
	w.buf.Reset()
	if err := json.NewEncoder(&w.buf).Encode(&r); err != nil { // Encode adds the newline
		return fmt.Errorf("trace: %w", err)
	}
	if _, err := w.w.Write(w.buf.Bytes()); err != nil {
		w.err = fmt.Errorf("trace: %w", err)
	}
	return w.err
}

// Reader reads records from a trace. It is not safe for concurrent use.
type Reader struct {
	sc   *bufio.Scanner
	line int
	last int64
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20) // a line holds a whole prompt
	return &Reader{sc: sc}
}

// Read returns the next record, or io.EOF after the last. Errors name the
// line.
func (r *Reader) Read() (Record, error) {
	for r.sc.Scan() {
		r.line++
		b := bytes.TrimSpace(r.sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return Record{}, fmt.Errorf("trace: line %d: %w", r.line, err)
		}
		if err := rec.Validate(); err != nil {
			return Record{}, fmt.Errorf("trace: line %d: %w", r.line, err)
		}
		if rec.At < r.last {
			return Record{}, fmt.Errorf("trace: line %d: t_ms %d is before the previous record's %d", r.line, rec.At, r.last)
		}
		r.last = rec.At
		return rec, nil
	}
	if err := r.sc.Err(); err != nil {
		return Record{}, fmt.Errorf("trace: line %d: %w", r.line+1, err)
	}
	return Record{}, io.EOF
}

// ReadAll reads every record of r.
func ReadAll(r io.Reader) ([]Record, error) {
	tr := NewReader(r)
	var out []Record
	for {
		rec, err := tr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}
