package main

import (
	"fmt"

	"github.com/prefixd/prefixd/blockstore"
)

// poolShare is the share of the free memory, less the model's mapped
// weights and the host tier, that the default CPU KV pool takes. The pool
// lives on the Go heap, whose collector lets the heap grow to twice its
// live size before it runs (GOGC=100): what requests allocate around the
// pool may take as much again, and the last third stays for the OS's page
// cache and other processes.
const poolShare = 1.0 / 3

// fixedSeqTokens is the sequence length the default CPU pool is sized for,
// --max-running of them, where the free memory is unknown (not Linux).
const fixedSeqTokens = 512

// kvPool is the KV pool serve settles on, and what settled it.
type kvPool struct {
	blocks     int
	blockBytes int64
	// rule names the flag or rule that chose blocks, for the start-up log.
	rule string
	// figures are the log attributes the rule read (memory, its source).
	figures []any
}

// bytes is the pool's size in bytes.
func (p kvPool) bytes() int64 { return int64(p.blocks) * p.blockBytes }

// poolInputs is what sizes the pool beside the options.
type poolInputs struct {
	// maxLen is the effective context: the model's, or --max-model-len
	// when that is shorter.
	maxLen int
	// blockBytes is one block's K/V across all layers on the device.
	blockBytes int64
	// gpuBytes is, on a GPU, the memory the weights leave to the pool
	// (deviceRunner.kvBytes); 0 on the CPU.
	gpuBytes int64
	// mappedBytes are the model file's bytes its tensors view through a
	// mapping (GGUF, safetensors): they will become resident as the
	// weights are read, yet MemAvailable counts them as free.
	mappedBytes int64
	// freeMemory reads the memory free for new allocations
	// (availableMemory); an error leaves the CPU default to the fixed rule.
	freeMemory func() (freeMemory, error)
}

// sizePool chooses the KV pool: --blocks or --kv-bytes when given, on a
// GPU what the weights leave of its memory share, and on the CPU a share
// of the free memory (see cpuDefault). It refuses, as a usage error, a
// pool that cannot hold one sequence of the effective context, and an
// explicit CPU pool beyond the machine's memory.
func sizePool(o *serveOptions, in poolInputs) (kvPool, error) {
	p := kvPool{blockBytes: in.blockBytes}
	need := blockstore.BlocksFor(in.maxLen, o.blockSize)
	remedy := "give a larger --blocks or --kv-bytes, or a smaller --max-model-len"
	switch {
	case o.blocks > 0:
		p.blocks, p.rule = o.blocks, "--blocks"
	case o.kvBytes > 0:
		p.blocks, p.rule = int(int64(o.kvBytes)/in.blockBytes), "--kv-bytes"
	case in.gpuBytes > 0:
		p.blocks, p.rule = int(in.gpuBytes/in.blockBytes), "--gpu-memory-fraction"
		remedy = "raise --gpu-memory-fraction, or give a smaller --max-model-len"
	default:
		free, err := in.freeMemory()
		if err != nil {
			p.blocks = max(o.maxRunning*blockstore.BlocksFor(min(fixedSeqTokens, in.maxLen), o.blockSize), need)
			p.rule, p.figures = fmt.Sprintf("--max-running sequences of %d tokens (free memory unknown)", fixedSeqTokens), []any{"memory_error", err.Error()}
			break
		}
		return cpuDefault(p, free, in.mappedBytes, int64(o.hostTierBytes), need, o.maxRunning, contextName(o, in.maxLen))
	}
	if in.gpuBytes == 0 {
		if err := fitsMemory(p.blocks, p.blockBytes); err != nil {
			return kvPool{}, err
		}
	}
	if p.blocks < need {
		return kvPool{}, usagef("a KV pool of %d blocks (%s, %d bytes) cannot hold one sequence of %s: that needs %d blocks of %d tokens (%d bytes); %s",
			p.blocks, p.rule, p.bytes(), contextName(o, in.maxLen), need, o.blockSize, int64(need)*p.blockBytes, remedy)
	}
	return p, nil
}

// cpuDefault sizes the CPU pool when no flag does: poolShare of the free
// memory less the mapped weights and the host tier, capped at what
// --max-running sequences of the full context can hold, and never below
// one such sequence; if even that one does not fit in what is free, it
// refuses.
func cpuDefault(p kvPool, free freeMemory, mapped, hostTier int64, need, maxRunning int, context string) (kvPool, error) {
	left := free.bytes - mapped - hostTier
	p.figures = []any{"memory_free", free.bytes, "memory_source", free.source, "weights_mapped", mapped,
		"share", fmt.Sprintf("%.3f", poolShare)}
	if needBytes := int64(need) * p.blockBytes; left < needBytes {
		return kvPool{}, usagef("the memory free (%d bytes by %s) less the model's mapped weights (%d) and the host tier (%d) leaves %d bytes, "+
			"less than one sequence of %s needs: %d blocks (%d bytes); free memory, or give a smaller --max-model-len",
			free.bytes, free.source, mapped, hostTier, max(left, 0), context, need, needBytes)
	}
	share := int64(float64(left) * poolShare / float64(p.blockBytes))
	most := int64(maxRunning) * int64(need)
	switch {
	case share < int64(need):
		p.blocks, p.rule = need, "one sequence of the context (the memory share holds less)"
	case share > most:
		p.blocks, p.rule = int(most), "--max-running sequences of the context (the memory share holds more)"
	default:
		p.blocks, p.rule = int(share), "share of free memory"
	}
	return p, nil
}

// contextName says what sets the effective context, for messages.
func contextName(o *serveOptions, maxLen int) string {
	if o.maxModelLen > 0 && o.maxModelLen == maxLen {
		return fmt.Sprintf("--max-model-len %d tokens", maxLen)
	}
	return fmt.Sprintf("the model's %d-token context", maxLen)
}

// fitsMemory refuses a KV pool of blocks larger than the machine's
// memory, which would otherwise end the process when allocated.
func fitsMemory(blocks int, blockBytes int64) error {
	total := physicalMemory()
	if total == 0 {
		return nil
	}
	if int64(blocks) > total/blockBytes {
		return usagef("a KV pool of %d blocks of %d bytes does not fit this machine's %d bytes of memory", blocks, blockBytes, total)
	}
	return nil
}
