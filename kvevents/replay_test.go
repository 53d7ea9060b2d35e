package kvevents_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/radix"
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
		pub.Stored("", radix.NoParent, []int32{int32(i)}, []blockstore.BlockID{blockstore.BlockID(i)})
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
	if pub.Sent() != 5 || pub.Dropped() != 0 {
		t.Errorf("sent %d dropped %d, want 5 and 0", pub.Sent(), pub.Dropped())
	}
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
