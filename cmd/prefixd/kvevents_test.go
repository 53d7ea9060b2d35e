package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

func TestKVEventsUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--kv-events-endpoint", "tcp://127.0.0.1:0"}, "needs --kv-events-pod-id"},
		{[]string{"--kv-events-pod-id", "10.0.0.1:8000"}, "need --kv-events-endpoint"},
		{[]string{"--kv-events-replay-endpoint", "tcp://*:5558"}, "need --kv-events-endpoint"},
		{[]string{"--kv-events-buffer", "0"}, "must be positive"},
		{[]string{"--kv-events-detail", "hashes"}, "--kv-events-detail needs --kv-events-endpoint"},
		{[]string{"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-pod-id", "p", "--kv-events-detail", "tokens"}, `detail "tokens"`},
		{[]string{"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-pod-id", "p", "--api-keys", "k=acme", "--kv-events-detail", "full,acme=hashes,acne=none"},
			`names namespace "acne", which no --api-keys key maps to`},
		{[]string{"--kv-events-endpoint", "udp-nonsense", "--kv-events-pod-id", "p", "--blocks", "8", "--max-model-len", "128"}, "kvevents"},
	} {
		var stderr bytes.Buffer
		code := exitCode("serve", serve(t.Context(), func() {}, c.args, nil, io.Discard, &stderr), &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.msg) {
			t.Errorf("%q: exit %d, stderr %q lacks %q", c.args, code, stderr.String(), c.msg)
		}
	}
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServeKVEvents runs `prefixd serve` with events on, subscribes as
// llm-d does and sees a prompt's blocks published under the pod's topic,
// with their token ids.
func TestServeKVEvents(t *testing.T) {
	ev := firstStored(t, "")
	if tokens, _ := ev[3].([]any); len(tokens) == 0 {
		t.Errorf("BlockStored %v carries no token ids", ev)
	}
}

// TestServeKVEventsDetail: with --kv-events-detail hashes a tenant's
// blocks go out without their token ids and without the tenant's name,
// which every subscriber used to receive.
func TestServeKVEventsDetail(t *testing.T) {
	ev := firstStored(t, "k1", "--api-keys", "k1=acme", "--kv-events-detail", "full,acme=hashes")
	if tokens, ok := ev[3].([]any); !ok || len(tokens) != 0 || ev[7] != nil || ev[5] == nil {
		t.Errorf("BlockStored %v: want token_ids [], a lora_id and lora_name nil", ev)
	}
}

// firstStored serves with events on and args, generates with the API key
// key (none if ""), subscribes as llm-d does and returns the first
// message's first event, a BlockStored, as its fields.
func firstStored(t *testing.T, key string, args ...string) []any {
	addr := freePort(t)
	url, _ := startServe(t, append([]string{"--blocks", "64", "--block-size", "8", "--max-model-len", "512", "--threads", "1",
		"--kv-events-endpoint", "tcp://" + addr, "--kv-events-pod-id", "10.1.2.3:8000"}, args...)...)
	sub := zmq4.NewSub(context.Background())
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	got := make(chan zmq4.Msg, 64)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			got <- m
		}
	}()
	// The subscription reaches the publisher a little after Dial; prompts
	// of new blocks keep events coming until one arrives.
	deadline := time.After(60 * time.Second) // a hang guard
	for i := 0; ; i++ {
		req, _ := http.NewRequest("POST", url+"/generate",
			strings.NewReader(`{"prompt_ids": [`+strings.Repeat(strconv.Itoa(1+i%250)+", ", 16)+`1], "max_tokens": 1}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/generate: %s", resp.Status)
		}
		select {
		case m := <-got:
			if len(m.Frames) != 3 || string(m.Frames[0]) != "kv@10.1.2.3:8000@prefixd-builtin-byte-3m" || len(m.Frames[1]) != 8 {
				t.Fatalf("frames %q", m.Frames)
			}
			var batch []any
			if err := msgpack.Unmarshal(m.Frames[2], &batch); err != nil || len(batch) != 3 {
				t.Fatalf("payload %x: %v", m.Frames[2], err)
			}
			ev, _ := batch[1].([]any)[0].([]any)
			if len(ev) != 8 || ev[0] != "BlockStored" {
				t.Fatalf("first event %v, want a BlockStored", ev)
			}
			t.Logf("message %d: %v", binary.BigEndian.Uint64(m.Frames[1]), ev)
			return ev
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no event published")
		}
	}
}
