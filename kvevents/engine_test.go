package kvevents_test

import (
	"context"
	"testing"
	"time"

	"github.com/prefixd/prefixd/engine"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/model"
)

// TestEngineFeedsCollector runs the real engine (built-in model) with a
// Collector: a prompt's full blocks are published under the namespace's
// model name as the scheduler caches them, batches are never empty, and a
// full flush ends in AllBlocksCleared with nothing left on the GPU.
func TestEngineFeedsCollector(t *testing.T) {
	const blockSize = 8
	batches := make(chan kvevents.Batch, 1024)
	col, err := kvevents.NewCollector(kvevents.CollectorConfig{Model: modelName, BlockSize: blockSize,
		Emit: func(b kvevents.Batch) {
			select {
			case batches <- b:
			default:
				t.Error("test buffer full")
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	w := cpu.NewWorkers(1)
	defer w.Close()
	m := model.Builtin()
	eng, err := engine.New(engine.Config{Model: model.NewRunner(m, w), EOS: -1, NumBlocks: 64, BlockSize: blockSize, CacheEvents: col})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())

	r := newRouter(modelName)
	drain := func(done func() bool) {
		t.Helper()
		timeout := time.After(30 * time.Second) // a hang guard
		for !done() {
			select {
			case b := <-batches:
				payload, err := b.AppendMsgpack(nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := r.apply(payload); err != nil {
					t.Fatal(err)
				}
			case <-timeout:
				t.Fatal("the engine published nothing more")
			}
		}
	}
	prompt := make([]int32, 3*blockSize+3)
	for i := range prompt {
		prompt[i] = int32(65 + i%26)
	}
	for _, ns := range []string{"", "acme"} {
		s, err := eng.Submit(context.Background(), engine.Request{Namespace: ns, Prompt: prompt, MaxTokens: 2, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if res := s.Result(); res.Err != nil {
			t.Fatal(res.Err)
		}
		key := prefixKey(kvevents.TenantModel(modelName, ns), prompt[:3*blockSize])
		drain(func() bool { return r.keys("GPU")[key] })
	}
	if _, err := eng.Flush("", true); err != nil {
		t.Fatal(err)
	}
	drain(func() bool { return r.seen["AllBlocksCleared"] > 0 })
	if len(r.media["GPU"]) != 0 {
		t.Fatalf("after a full flush the router holds %d GPU blocks", len(r.media["GPU"]))
	}
}
