package kvevents_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// This file is a router's side of the wire, written from vLLM's format
// (vllm/distributed/kv_events.py) the way llm-d's vLLM adapter reads it:
// the batch and each event are positional msgpack arrays, an event is
// dispatched on its tag and decoded into a struct by position, so missing
// trailing fields stay zero; hashes may come as any integer or as bytes.

type eventBatch struct {
	_                struct{} `msgpack:",as_array"`
	TS               float64
	Events           []msgpack.RawMessage
	DataParallelRank *int
}

type blockStored struct {
	_               struct{} `msgpack:",as_array"`
	Tag             string
	BlockHashes     []any
	ParentBlockHash any
	TokenIDs        []uint32
	BlockSize       int
	LoraID          *int
	Medium          *string
	LoraName        *string
}

type blockRemoved struct {
	_           struct{} `msgpack:",as_array"`
	Tag         string
	BlockHashes []any
	Medium      *string
}

// hashValue converts a wire hash as llm-d does: any integer, or the last
// eight bytes of a byte string, big-endian.
func hashValue(v any) (uint64, error) {
	switch h := v.(type) {
	case uint64:
		return h, nil
	case uint32:
		return uint64(h), nil
	case uint16:
		return uint64(h), nil
	case uint8:
		return uint64(h), nil
	case int64:
		return uint64(h), nil
	case int32:
		return uint64(h), nil
	case int16:
		return uint64(h), nil
	case int8:
		return uint64(h), nil
	case []byte:
		var b [8]byte
		copy(b[max(0, 8-len(h)):], h[max(0, len(h)-8):])
		return binary.BigEndian.Uint64(b[:]), nil
	}
	return 0, fmt.Errorf("hash of type %T", v)
}

// block is what the router learned of one block.
type block struct {
	parent uint64 // 0: none
	tokens []int32
	lora   string // lora_name, "" for none
}

// router rebuilds a replica's cached blocks per medium from its events.
type router struct {
	model  string
	next   uint64                     // sequence number expected next
	media  map[string]map[uint64]bool // medium -> hashes held
	blocks map[uint64]block           // every block ever stored, by hash
	seen   map[string]int             // event tags seen, for coverage
	loras  map[string]bool            // lora names seen
}

func newRouter(model string) *router {
	return &router{model: model, media: map[string]map[uint64]bool{}, blocks: map[uint64]block{},
		seen: map[string]int{}, loras: map[string]bool{}}
}

// apply decodes one message's payload and applies its events.
func (r *router) apply(payload []byte) error {
	var b eventBatch
	if err := msgpack.Unmarshal(payload, &b); err != nil {
		return fmt.Errorf("batch: %w", err)
	}
	if b.DataParallelRank != nil {
		return fmt.Errorf("data_parallel_rank %d, want nil", *b.DataParallelRank)
	}
	if len(b.Events) == 0 {
		return fmt.Errorf("an empty batch was published")
	}
	for _, raw := range b.Events {
		var fields []msgpack.RawMessage
		if err := msgpack.Unmarshal(raw, &fields); err != nil || len(fields) == 0 {
			return fmt.Errorf("event %x: not a tagged array (%v)", raw, err)
		}
		var tag string
		if err := msgpack.Unmarshal(fields[0], &tag); err != nil {
			return fmt.Errorf("event tag: %w", err)
		}
		r.seen[tag]++
		var err error
		switch tag {
		case "BlockStored":
			var ev blockStored
			if err = msgpack.Unmarshal(raw, &ev); err == nil {
				err = r.stored(&ev)
			}
		case "BlockRemoved":
			var ev blockRemoved
			if err = msgpack.Unmarshal(raw, &ev); err == nil {
				err = r.removed(&ev)
			}
		case "AllBlocksCleared":
			clear(r.media)
		default:
			err = fmt.Errorf("unknown tag %q", tag)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tag, err)
		}
	}
	return nil
}

func medium(m *string) string {
	if m == nil {
		return "GPU" // vLLM's default
	}
	return *m
}

func (r *router) held(m string) map[uint64]bool {
	if r.media[m] == nil {
		r.media[m] = map[uint64]bool{}
	}
	return r.media[m]
}

func (r *router) stored(ev *blockStored) error {
	if ev.BlockSize <= 0 || len(ev.TokenIDs) != len(ev.BlockHashes)*ev.BlockSize {
		return fmt.Errorf("%d tokens for %d blocks of %d", len(ev.TokenIDs), len(ev.BlockHashes), ev.BlockSize)
	}
	var parent uint64
	if ev.ParentBlockHash != nil {
		var err error
		if parent, err = hashValue(ev.ParentBlockHash); err != nil {
			return err
		}
		if _, ok := r.blocks[parent]; !ok || parent == 0 {
			return fmt.Errorf("parent %#x was never published", parent)
		}
	}
	lora := ""
	if ev.LoraName != nil {
		lora = *ev.LoraName
		r.loras[lora] = true
		if ev.LoraID == nil || *ev.LoraID <= 0 {
			return fmt.Errorf("lora_name %q without a positive lora_id", lora)
		}
	}
	held := r.held(medium(ev.Medium))
	for i, hv := range ev.BlockHashes {
		h, err := hashValue(hv)
		if err != nil {
			return err
		}
		if h == 0 {
			return fmt.Errorf("block hash 0")
		}
		toks := make([]int32, ev.BlockSize)
		for j := range toks {
			toks[j] = int32(ev.TokenIDs[i*ev.BlockSize+j])
		}
		if old, ok := r.blocks[h]; ok && (old.parent != parent || old.lora != lora || !equal(old.tokens, toks)) {
			return fmt.Errorf("hash %#x names two different blocks", h)
		}
		r.blocks[h] = block{parent: parent, tokens: toks, lora: lora}
		held[h] = true
		parent = h
	}
	return nil
}

func (r *router) removed(ev *blockRemoved) error {
	held := r.held(medium(ev.Medium))
	for _, hv := range ev.BlockHashes {
		h, err := hashValue(hv)
		if err != nil {
			return err
		}
		if !held[h] {
			return fmt.Errorf("removes %#x from %s, which does not hold it", h, medium(ev.Medium))
		}
		delete(held, h)
	}
	return nil
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// path returns every token from the namespace root to the end of block h,
// following parents as a router chaining its own keys does.
func (r *router) path(h uint64) []int32 {
	var chain [][]int32
	for h != 0 {
		b := r.blocks[h]
		chain = append(chain, b.tokens)
		h = b.parent
	}
	var out []int32
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i]...)
	}
	return out
}

// keys returns what medium m holds as a router keys it: model (or lora
// name) and the whole token path.
func (r *router) keys(m string) map[string]bool {
	out := map[string]bool{}
	for h := range r.media[m] {
		lora := r.blocks[h].lora
		if lora == "" {
			lora = r.model
		}
		out[prefixKey(lora, r.path(h))] = true
	}
	return out
}

func prefixKey(model string, tokens []int32) string {
	var sb strings.Builder
	sb.WriteString(model)
	for _, t := range tokens {
		fmt.Fprintf(&sb, " %d", t)
	}
	return sb.String()
}

// subscriber is a SUB socket on a replica's events, with the replica's
// replay socket to fill gaps (a subscriber that joined late, or missed the
// first messages while its subscription travelled).
type subscriber struct {
	t      *testing.T
	sub    zmq4.Socket
	replay string
	topic  string
	r      *router
	msgs   chan zmq4.Msg
}

func subscribe(t *testing.T, addr, replay, topic, model string) *subscriber {
	t.Helper()
	sub := zmq4.NewSub(context.Background())
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	s := &subscriber{t: t, sub: sub, replay: replay, topic: topic, r: newRouter(model), msgs: make(chan zmq4.Msg, 1<<16)}
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(s.msgs)
				return
			}
			s.msgs <- m
		}
	}()
	t.Cleanup(func() { sub.Close() })
	return s
}

// take applies one message (seq, payload), replaying first if it shows a
// gap; messages already applied are skipped. A gap the replay does not
// fill fails the test: the publisher buffers every message before it
// publishes it, so a live message's predecessors are always replayable.
func (s *subscriber) take(seq uint64, payload []byte) {
	s.t.Helper()
	if seq < s.r.next {
		return
	}
	if seq > s.r.next {
		s.replayFrom(s.r.next)
		if seq < s.r.next {
			return
		}
		if seq > s.r.next {
			s.t.Fatalf("message %d arrived, but the replay ended at %d", seq, s.r.next)
		}
	}
	if err := s.r.apply(payload); err != nil {
		s.t.Fatalf("message %d: %v", seq, err)
	}
	s.r.next = seq + 1
}

// replayFrom asks the ROUTER socket for every buffered message from seq on
// and applies them.
func (s *subscriber) replayFrom(seq uint64) {
	s.t.Helper()
	replay(s.t, s.replay, seq, func(got uint64, payload []byte) {
		if got != s.r.next {
			s.t.Fatalf("replay sent %d, want %d (the buffer lost messages)", got, s.r.next)
		}
		if err := s.r.apply(payload); err != nil {
			s.t.Fatalf("replayed message %d: %v", got, err)
		}
		s.r.next = got + 1
	})
}

// replay sends vLLM's replay request for messages from seq on to the
// ROUTER socket at addr and passes each answer to fn, until the end
// marker.
func replay(t *testing.T, addr string, seq uint64, fn func(seq uint64, payload []byte)) {
	t.Helper()
	d := zmq4.NewDealer(context.Background(), zmq4.WithTimeout(10*time.Second))
	defer d.Close()
	if err := d.Dial("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, seq))); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := d.Recv()
		if err != nil {
			t.Fatalf("replay from %d: %v", seq, err)
		}
		if len(m.Frames) != 3 || len(m.Frames[0]) != 0 || len(m.Frames[1]) != 8 {
			t.Fatalf("replay message of %d frames %q", len(m.Frames), m.Frames)
		}
		got := binary.BigEndian.Uint64(m.Frames[1])
		if int64(got) == -1 {
			if len(m.Frames[2]) != 0 {
				t.Fatalf("end marker with a payload %x", m.Frames[2])
			}
			return
		}
		fn(got, m.Frames[2])
	}
}

// until takes live messages until done reports true.
func (s *subscriber) until(done func() bool) {
	s.t.Helper()
	timeout := time.After(30 * time.Second) // a hang guard, not a speed check
	for !done() {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				s.t.Fatal("subscription closed")
			}
			if len(m.Frames) != 3 || string(m.Frames[0]) != s.topic || len(m.Frames[1]) != 8 {
				s.t.Fatalf("message frames %q, want [%s, seq, payload]", m.Frames, s.topic)
			}
			s.take(binary.BigEndian.Uint64(m.Frames[1]), m.Frames[2])
		case <-time.After(200 * time.Millisecond):
			// Quiet: the subscription may have reached the publisher after
			// the last message; ask for what was published since.
			s.replayFrom(s.r.next)
		case <-timeout:
			s.t.Fatalf("no message completed the wait; at seq %d", s.r.next)
		}
	}
}
