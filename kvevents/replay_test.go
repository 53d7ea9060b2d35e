package kvevents_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvcache"
	"github.com/prefixd/prefixd/kvevents"
)

// TestReplayKeepsTheLatest checks that the replay socket resends the
// newest Buffer messages from the asked sequence number on, and that a
// step without events publishes nothing.
func TestReplayKeepsTheLatest(t *testing.T) {
	pub, err := kvevents.New(kvevents.Config{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		PodID: pod, Model: modelName, BlockSize: 1, Buffer: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range 5 {
		pub.Stored("", kvcache.Fingerprint{}, []int32{int32(i)}, []blockstore.BlockID{blockstore.BlockID(i)}, chain("", []int32{int32(i)}, 1))
		pub.EndStep()
		pub.EndStep() // nothing new: no message
	}
	for deadline := time.Now().Add(30 * time.Second); pub.Sent() < 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard
			t.Fatalf("%d messages sent, want 5", pub.Sent())
		}
	}
	for _, tc := range []struct {
		from uint64
		want []uint64
	}{{0, []uint64{2, 3, 4}}, {3, []uint64{3, 4}}, {5, nil}} {
		var got []uint64
		replay(t, pub.ReplayAddr(), tc.from, func(seq uint64, payload []byte) {
			r := newRouter(modelName)
			if err := r.apply(payload); err != nil {
				t.Fatal(err)
			}
			// Message seq carries the block of token seq.
			if key := prefixKey(modelName, []int32{int32(seq)}); !r.keys("GPU")[key] {
				t.Errorf("message %d carries %v, want %q", seq, r.keys("GPU"), key)
			}
			got = append(got, seq)
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("replay from %d sent %v, want %v", tc.from, got, tc.want)
		}
	}
	if pub.Sent() != 5 || pub.Merged() != 0 {
		t.Errorf("sent %d merged %d, want 5 and 0", pub.Sent(), pub.Merged())
	}
}

// TestFullQueueLosesNothing publishes steps faster than a one-batch queue
// can take them: whatever EndStep could not queue goes out merged into a
// later message, so a subscriber still learns every block, in order, from
// contiguous sequence numbers.
func TestFullQueueLosesNothing(t *testing.T) {
	pub, err := kvevents.New(kvevents.Config{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		PodID: pod, Model: modelName, BlockSize: 1, Queue: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	s := subscribe(t, pub.Addr(), pub.ReplayAddr(), kvevents.Topic(pod, modelName), modelName)
	const steps, held = 2000, 1000
	release := pub.HoldSends() // the first held steps find the publisher stuck
	for i := range steps {
		if i == held {
			release()
		}
		// Each step replaces the previous step's block: a lost or reordered
		// batch leaves the router holding the wrong block, or fails it.
		if i > 0 {
			pub.Removed("", []blockstore.BlockID{blockstore.BlockID(i - 1)}, chain("", []int32{int32(i - 1)}, 1))
		}
		pub.Stored("", kvcache.Fingerprint{}, []int32{int32(i)}, []blockstore.BlockID{blockstore.BlockID(i)}, chain("", []int32{int32(i)}, 1))
		pub.EndStep()
	}
	last := prefixKey(modelName, []int32{steps - 1})
	s.until(func() bool { return s.r.keys("GPU")[last] })
	if got := s.r.keys("GPU"); len(got) != 1 {
		t.Errorf("the router holds %d blocks, want only %q", len(got), last)
	}
	if s.r.seen["BlockStored"] != steps || s.r.seen["BlockRemoved"] != steps-1 {
		t.Errorf("%d BlockStored and %d BlockRemoved, want %d and %d", s.r.seen["BlockStored"], s.r.seen["BlockRemoved"], steps, steps-1)
	}
	// With the publisher held, at most two of the first held batches got
	// into the queue or the send; every other one merged.
	if m := pub.Merged(); m < held-2 {
		t.Errorf("%d batches merged, want at least %d: the merge path did not run", m, held-2)
	}
	t.Logf("%d messages, %d batches merged", pub.Sent(), pub.Merged())
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []kvevents.Config{
		{PodID: "p", Model: "m", BlockSize: 1},
		{Endpoint: "tcp://127.0.0.1:0", Model: "m", BlockSize: 1},
		{Endpoint: "tcp://127.0.0.1:0", PodID: "p", BlockSize: 1},
		{Endpoint: "tcp://127.0.0.1:0", PodID: "p", Model: "m"},
		{Endpoint: "tcp://127.0.0.1:0", PodID: "p", Model: "m", BlockSize: 1, Buffer: -1},
		{Endpoint: "bogus", PodID: "p", Model: "m", BlockSize: 1},
	} {
		if p, err := kvevents.New(cfg); err == nil {
			p.Close()
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
