package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/prefixd/prefixd/clock"
)

// endSeq is the sequence number of vLLM's end-of-replay marker, -1.
const endSeq = ^uint64(0)

// Config configures a Publisher. Zero values take the documented defaults.
type Config struct {
	// Endpoint is where the PUB socket listens, e.g. "tcp://*:5557" (llm-d
	// dials every pod on 5557). Required.
	Endpoint string
	// ReplayEndpoint, if set, is where the ROUTER socket that replays
	// buffered messages listens, e.g. "tcp://*:5558".
	ReplayEndpoint string
	// PodID names this replica in the topic kv@<PodID>@<Model>; llm-d
	// scores pods as "<ip>:<port>". Required.
	PodID string
	// Model is the served model name. Required.
	Model string
	// BlockSize is the engine's tokens per block. Required.
	BlockSize int
	// Buffer is how many recent messages the replay socket can resend;
	// default 10000 (vLLM's buffer_steps).
	Buffer int
	// HWM is the PUB socket's high-water mark in messages: beyond it
	// messages are dropped, not queued; default 100000 (vLLM's).
	HWM int
	// Queue is how many batches may wait for the publishing goroutine
	// before EndStep merges its batch into the next one; default 1024.
	Queue int
	// Clock stamps batches; default the system clock.
	Clock clock.Clock
	// Policy chooses what each namespace's events reveal (see Detail);
	// the zero Policy publishes everything, as vLLM does.
	Policy Policy
}

func (c *Config) fill() error {
	switch {
	case c.Endpoint == "":
		return errorf("Config.Endpoint is required")
	case c.PodID == "":
		return errorf("Config.PodID is required")
	case c.Model == "":
		return errorf("Config.Model is required")
	}
	for _, f := range []struct {
		v    *int
		def  int
		name string
	}{{&c.Buffer, 10000, "Buffer"}, {&c.HWM, 100000, "HWM"}, {&c.Queue, 1024, "Queue"}} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 0 {
			return errorf("Config.%s must be positive, got %d", f.name, *f.v)
		}
	}
	return nil
}

// Topic returns the topic a replica's messages carry.
func Topic(podID, model string) string { return "kv@" + podID + "@" + model }

// Publisher publishes a Collector's batches on a ZeroMQ PUB socket and
// keeps the recent ones for a ROUTER replay socket. It is the
// engine.CacheEvents to give an engine. Close stops it.
type Publisher struct {
	*Collector
	pub, replay zmq4.Socket
	topic       []byte
	queue       chan Batch
	cancel      context.CancelFunc // closes the sockets
	stop        chan struct{}      // closed by Close: drain the queue and return
	ran         chan struct{}      // closed when run returned
	replayed    chan struct{}      // closed when serveReplay returned
	closeOnce   sync.Once

	merged atomic.Uint64 // batches EndStep found no room for
	sent   atomic.Uint64 // messages handed to the PUB socket

	// carry gathers the batches that found the queue full, in order, as
	// one; while it is non-nil the queue takes nothing, so everything in
	// the queue is older than carry and run sends carry once the queue is
	// empty. Guarded by cmu.
	cmu   sync.Mutex
	carry *Batch

	mu   sync.Mutex // guards the ring of recent messages
	ring []message  // circular, cap Config.Buffer
	head int        // index of the oldest message in ring
	next uint64     // sequence number of the next message
}

type message struct {
	seq     uint64
	payload []byte
}

// New binds the sockets and starts publishing.
func New(cfg Config) (*Publisher, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Publisher{
		topic:  []byte(Topic(cfg.PodID, cfg.Model)),
		queue:  make(chan Batch, cfg.Queue),
		cancel: cancel,
		stop:   make(chan struct{}),
		ran:    make(chan struct{}),
		ring:   make([]message, 0, cfg.Buffer),
	}
	var err error
	p.Collector, err = NewCollector(CollectorConfig{Model: cfg.Model, BlockSize: cfg.BlockSize, Clock: cfg.Clock, Emit: p.enqueue, Policy: cfg.Policy})
	if err != nil {
		cancel()
		return nil, err
	}
	p.pub = zmq4.NewPub(ctx)
	if err := p.pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
		p.closeSockets()
		return nil, errorf("PUB high-water mark: %w", err)
	}
	if err := p.pub.Listen(cfg.Endpoint); err != nil {
		p.closeSockets()
		return nil, errorf("listening on %s: %w", cfg.Endpoint, err)
	}
	if cfg.ReplayEndpoint != "" {
		p.replay = zmq4.NewRouter(ctx, zmq4.WithTimeout(5*time.Second))
		if err := p.replay.Listen(cfg.ReplayEndpoint); err != nil {
			p.closeSockets()
			return nil, errorf("listening for replay on %s: %w", cfg.ReplayEndpoint, err)
		}
		p.replayed = make(chan struct{})
		go p.serveReplay(ctx)
	}
	go p.run()
	return p, nil
}

// Addr returns the address the PUB socket listens on (its port when the
// endpoint asked for port 0).
func (p *Publisher) Addr() string { return p.pub.Addr().String() }

// ReplayAddr returns the replay socket's address, or "" without one.
func (p *Publisher) ReplayAddr() string {
	if p.replay == nil {
		return ""
	}
	return p.replay.Addr().String()
}

// Merged returns the number of batches that found the publishing
// goroutine Config.Queue batches behind and went out as part of a later
// message instead.
func (p *Publisher) Merged() uint64 { return p.merged.Load() }

// Sent returns the number of messages published.
func (p *Publisher) Sent() uint64 { return p.sent.Load() }

// enqueue is the Collector's Emit: it never blocks and loses no event.
// Dropping a batch would be invisible to subscribers (sequence numbers are
// given as batches go out, so no gap would show) and would leave their view
// of the cache wrong for good; a batch that finds the queue full waits in
// carry instead, merged with those that follow it until run catches up.
func (p *Publisher) enqueue(b Batch) {
	select {
	case <-p.stop: // nothing would send it
		return
	default:
	}
	p.cmu.Lock()
	defer p.cmu.Unlock()
	if p.carry == nil {
		select {
		case p.queue <- b:
			return
		default:
			p.carry = &Batch{}
		}
	}
	p.carry.TS = b.TS
	p.carry.Events = append(p.carry.Events, b.Events...)
	p.merged.Add(1)
}

// sendCarry sends the merged batches once everything queued before them
// is sent. Only run calls it, after each batch it takes from the queue:
// carry is made only when the queue is full, so run always comes back.
func (p *Publisher) sendCarry() {
	p.cmu.Lock()
	b := p.carry
	if b == nil || len(p.queue) > 0 {
		p.cmu.Unlock()
		return
	}
	p.carry = nil
	p.cmu.Unlock()
	p.send(*b)
}

// run publishes queued batches until Close, then what is still queued.
func (p *Publisher) run() {
	defer close(p.ran)
	for {
		select {
		case b := <-p.queue:
			p.send(b)
			p.sendCarry()
		case <-p.stop:
			for {
				select {
				case b := <-p.queue:
					p.send(b)
					p.sendCarry()
				default:
					return
				}
			}
		}
	}
}

// send numbers, buffers and publishes one batch.
func (p *Publisher) send(b Batch) {
	payload, err := b.AppendMsgpack(nil)
	if err != nil {
		// Only a broken writer fails; bytes.Buffer never does.
		panic("kvevents: encoding a batch: " + err.Error())
	}
	p.mu.Lock()
	m := message{seq: p.next, payload: payload}
	p.next++
	if len(p.ring) < cap(p.ring) {
		p.ring = append(p.ring, m)
	} else if len(p.ring) > 0 {
		p.ring[p.head] = m
		p.head = (p.head + 1) % len(p.ring)
	}
	p.mu.Unlock()
	if p.pub.Send(zmq4.NewMsgFrom(p.topic, seqBytes(m.seq), payload)) == nil {
		p.sent.Add(1)
	}
}

func seqBytes(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// buffered returns the buffered messages with seq >= from, oldest first.
func (p *Publisher) buffered(from uint64) []message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []message
	for i := range p.ring {
		if m := p.ring[(p.head+i)%len(p.ring)]; m.seq >= from {
			out = append(out, m)
		}
	}
	return out
}

// serveReplay answers replay requests until Close. A malformed request
// is ignored, as vLLM does.
func (p *Publisher) serveReplay(ctx context.Context) {
	defer close(p.replayed)
	for {
		req, err := p.replay.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue // the receive timed out: wait again
		}
		if len(req.Frames) != 3 || len(req.Frames[1]) != 0 || len(req.Frames[2]) != 8 {
			continue
		}
		id := req.Frames[0]
		for _, m := range p.buffered(binary.BigEndian.Uint64(req.Frames[2])) {
			if p.replay.Send(zmq4.NewMsgFrom(id, nil, seqBytes(m.seq), m.payload)) != nil {
				break
			}
		}
		_ = p.replay.Send(zmq4.NewMsgFrom(id, nil, seqBytes(endSeq), nil))
	}
}

// Close stops publishing: batches already queued are sent, then both
// sockets close. EndStep calls after Close are dropped.
func (p *Publisher) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.stop)
		<-p.ran
		err = p.closeSockets()
		if p.replayed != nil {
			<-p.replayed
		}
	})
	return err
}

func (p *Publisher) closeSockets() error {
	p.cancel()
	var errs []error
	for _, s := range []zmq4.Socket{p.pub, p.replay} {
		// A peer that hung up first leaves a closed connection behind:
		// nothing is lost by that.
		if s == nil {
			continue
		}
		if err := s.Close(); !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
