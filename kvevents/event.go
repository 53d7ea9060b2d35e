package kvevents

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// Kind is the type of an Event.
type Kind uint8

// Event kinds, by their vLLM tags.
const (
	BlockStored Kind = iota
	BlockRemoved
	AllBlocksCleared
)

// Media a block is stored on, as vLLM names them.
const (
	MediumGPU  = "GPU"  // the device block pool
	MediumCPU  = "CPU"  // the host tier
	MediumDisk = "DISK" // the disk tier
)

var tags = [...]string{BlockStored: "BlockStored", BlockRemoved: "BlockRemoved", AllBlocksCleared: "AllBlocksCleared"}

// String returns the kind's wire tag.
func (k Kind) String() string { return tags[k] }

// Event is one KV cache event. Fields a kind does not carry are ignored.
type Event struct {
	Kind   Kind
	Hashes []uint64 // blocks stored or removed, each never 0
	// Parent is the hash of the block before Hashes[0] for BlockStored;
	// 0 means none.
	Parent uint64
	// Tokens holds the stored blocks' tokens, BlockSize per block.
	Tokens    []int32
	BlockSize int
	Medium    string
	// LoraID and LoraName mark a tenant's blocks (see the package
	// documentation); 0 and "" encode as nil.
	LoraID   int64
	LoraName string
}

// Batch is what one message carries: the events of one engine step.
type Batch struct {
	TS     float64 // Unix seconds when the step ended
	Events []Event
}

// AppendMsgpack appends the batch's msgpack payload to dst.
func (b *Batch) AppendMsgpack(dst []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	enc := msgpack.NewEncoder(buf)
	err := b.encode(enc)
	return buf.Bytes(), err
}

func (b *Batch) encode(enc *msgpack.Encoder) error {
	w := errWriter{enc: enc}
	w.arrayLen(3)
	w.do(enc.EncodeFloat64(b.TS))
	w.arrayLen(len(b.Events))
	for i := range b.Events {
		b.Events[i].encode(&w)
	}
	w.do(enc.EncodeNil()) // data_parallel_rank
	return w.err
}

func (e *Event) encode(w *errWriter) {
	enc := w.enc
	switch e.Kind {
	case BlockStored:
		w.arrayLen(8)
		w.do(enc.EncodeString(tags[BlockStored]))
		w.hashes(e.Hashes)
		w.optUint(e.Parent)
		w.arrayLen(len(e.Tokens))
		for _, t := range e.Tokens {
			w.do(enc.EncodeInt(int64(t)))
		}
		w.do(enc.EncodeInt(int64(e.BlockSize)))
		if e.LoraID == 0 {
			w.do(enc.EncodeNil())
		} else {
			w.do(enc.EncodeInt(e.LoraID))
		}
		w.do(enc.EncodeString(e.Medium))
		if e.LoraName == "" {
			w.do(enc.EncodeNil())
		} else {
			w.do(enc.EncodeString(e.LoraName))
		}
	case BlockRemoved:
		w.arrayLen(3)
		w.do(enc.EncodeString(tags[BlockRemoved]))
		w.hashes(e.Hashes)
		w.do(enc.EncodeString(e.Medium))
	case AllBlocksCleared:
		w.arrayLen(1)
		w.do(enc.EncodeString(tags[AllBlocksCleared]))
	}
}

// errWriter keeps the first encoding error so the encoders above read as
// the format they write.
type errWriter struct {
	enc *msgpack.Encoder
	err error
}

func (w *errWriter) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *errWriter) arrayLen(n int) { w.do(w.enc.EncodeArrayLen(n)) }

func (w *errWriter) hashes(hs []uint64) {
	w.arrayLen(len(hs))
	for _, h := range hs {
		w.do(w.enc.EncodeUint(h))
	}
}

func (w *errWriter) optUint(v uint64) {
	if v == 0 {
		w.do(w.enc.EncodeNil())
		return
	}
	w.do(w.enc.EncodeUint(v))
}
