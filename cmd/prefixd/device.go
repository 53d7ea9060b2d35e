package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kernels/cuda/gpu"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// deviceFlags choose where the model runs: --device, on the CPU the K/V
// cache's element type and where the weights live, and for a GPU the
// share of its memory prefixd may use, the element type of weights and
// K/V, and whether steps replay from CUDA graphs. serve, generate and
// bench share them.
type deviceFlags struct {
	device   string
	kvType   kvTypeFlag
	mmap     bool
	fraction float64
	dtype    string
	graphs   bool
}

// defaultKVType is --kv-type's default.
const defaultKVType = "f16"

func (d *deviceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.device, "device", "cpu", "where the model runs: cpu, or cuda (GPU 0; needs a binary built with -tags cuda)")
	if err := d.kvType.init(defaultKVType); err != nil {
		panic(err) // a typo in defaultKVType
	}
	fs.Var(&d.kvType, "kv-type", "with --device cpu: element type of the K/V cache: f16 (half the memory of f32: twice the blocks in the same bytes; values rounded to nearest even, attention computed in float32) or f32")
	fs.BoolVar(&d.mmap, "mmap", false, "keep GGUF and safetensors weights in the file's shared mapping (the page cache: processes serving one file share it, and memory grows only with the weights read) instead of copying them into huge pages of the process's own, where CPU decoding runs faster; always so with --device cuda, which copies the weights to the GPU")
	fs.Float64Var(&d.fraction, "gpu-memory-fraction", 0.9, "with --device cuda: the share of the GPU's memory prefixd may use; the KV pool gets what the weights leave of it")
	fs.StringVar(&d.dtype, "gpu-dtype", "bf16", "with --device cuda: element type of weights and K/V: bf16, f16 or f32")
	fs.BoolVar(&d.graphs, "gpu-graphs", true, "with --device cuda: run a step whose kernels repeat the step before's (decodes of the same rows) from one CUDA graph launch instead of hundreds of kernel launches; false launches every kernel")
}

// kvTypeFlag is --kv-type's value: the CPU K/V cache's element type, and
// whether any source (command line, environment, config file) set it, so
// that --device cuda, whose K/V type is --gpu-dtype's, refuses it rather
// than ignore it.
type kvTypeFlag struct {
	name string
	typ  kernels.DType
	set  bool
}

// init sets the default, which does not count as set.
func (f *kvTypeFlag) init(name string) error {
	t, err := model.ParseKVType(name)
	f.name, f.typ = name, t
	return err
}

func (f *kvTypeFlag) String() string { return f.name }

// Set parses f32 or f16; the flag package names the flag in the error.
func (f *kvTypeFlag) Set(s string) error {
	if err := f.init(s); err != nil {
		return errors.New("want f32 or f16")
	}
	f.set = true
	return nil
}

// check validates the flags; --device cuda in a binary without the GPU
// backend is a usage error that says so.
func (d *deviceFlags) check() error {
	if d.device == "cuda" && d.kvType.set {
		return usagef("--kv-type %s: applies to --device cpu; on a GPU the K/V cache has --gpu-dtype's element type", d.kvType.name)
	}
	switch d.device {
	case "cpu":
	case "cuda":
		if !gpu.Built {
			return usagef("--device cuda: this prefixd was built without the cuda build tag; build it with `go build -tags cuda` (see README's GPU section)")
		}
	default:
		return usagef("--device %q: want cpu or cuda", d.device)
	}
	if !(d.fraction > 0 && d.fraction <= 1) {
		return usagef("--gpu-memory-fraction %v: want a share in (0, 1]", d.fraction)
	}
	if _, err := src.ParseDType(d.dtype); err != nil {
		return usagef("--gpu-dtype: %v", err)
	}
	return nil
}

// mapWeights reports whether the model file stays mapped (--mmap, or a
// GPU) rather than copied into huge pages.
func (d *deviceFlags) mapWeights() bool { return d.mmap || d.device == "cuda" }

// kvTypeName names the K/V cache's element type on the chosen device:
// --kv-type's on the CPU, --gpu-dtype's on a GPU.
func (d *deviceFlags) kvTypeName() string {
	if d.device == "cuda" {
		return d.dtype
	}
	return d.kvType.name
}

// deviceRunner is a model runner on the chosen device.
type deviceRunner struct {
	*model.Runner
	// kvBytes is, on a GPU, the device memory left for the K/V pool; 0
	// on the CPU, whose pool the command sizes itself.
	kvBytes int64
	// memInfo reports the GPU's free and total memory; nil on the CPU.
	memInfo func() (free, total int64, err error)
	// fraction is --gpu-memory-fraction, which profile sizes kvBytes by.
	fraction float64
	close    func()
}

// profile runs, on a GPU, one step of the largest shape the engine will
// run (gpu.ProfileStep: maxTokens tokens over maxSeqs sequences), so that
// the activation and logits buffers have grown, then sets kvBytes to what
// the weights and those buffers leave of the memory share: a pool sized
// by it cannot make a later step run out of device memory. On the CPU it
// does nothing.
func (d *deviceRunner) profile(maxTokens, maxSeqs, blockSize int, log *slog.Logger) error {
	if d.memInfo == nil {
		return nil
	}
	if err := gpu.ProfileStep(d.Runner, maxTokens, maxSeqs, blockSize); err != nil {
		return fmt.Errorf("profiling a step of %d tokens: %w", maxTokens, err)
	}
	free, total, err := d.memInfo()
	if err != nil {
		return err
	}
	used := total - free
	d.kvBytes = int64(d.fraction*float64(total)) - used
	log.Info("gpu profile step", "max_batch_tokens", maxTokens, "sequences", maxSeqs, "memory_used", used, "kv_bytes", d.kvBytes)
	if d.kvBytes <= 0 {
		return usagef("--gpu-memory-fraction %v of the GPU's %d bytes leaves nothing for the KV pool: %d bytes are in use after the weights and a step of %d tokens", d.fraction, total, used, maxTokens)
	}
	return nil
}

// runner uploads m to the device and returns its runner; on a GPU it logs
// the device's memory and sizes the K/V pool's share of it.
func (d *deviceFlags) runner(m *model.Model, threads int, log *slog.Logger) (*deviceRunner, error) {
	if d.device != "cuda" {
		w := cpu.NewWorkers(threads)
		r := model.NewRunner(m, w)
		r.SetKVType(d.kvType.typ)
		return &deviceRunner{Runner: r, close: w.Close}, nil
	}
	dt, err := src.ParseDType(d.dtype)
	if err != nil {
		return nil, usagef("--gpu-dtype: %v", err)
	}
	g, err := gpu.OpenCUDA(0, dt)
	if err != nil {
		return nil, err
	}
	b := gpu.NewBackend(g)
	b.UseGraphs(d.graphs)
	b.NotifyGraphsOff(func(err error) { log.Warn("gpu graphs off", "err", err) })
	closeAll := func() error { return errors.Join(b.Close(), g.Close()) }
	r, err := model.NewRunnerOn(m, b)
	var free, total int64
	if err == nil {
		free, total, err = g.MemInfo()
	}
	if err != nil {
		return nil, errors.Join(err, closeAll())
	}
	used := total - free
	kv := int64(d.fraction*float64(total)) - used
	log.Info("gpu", "dtype", dt.String(), "memory_total", total, "memory_used_after_weights", used,
		"memory_fraction", d.fraction, "kv_bytes", kv)
	if kv <= 0 {
		return nil, errors.Join(usagef("--gpu-memory-fraction %v of the GPU's %d bytes leaves nothing for the KV pool: %d bytes are in use after the weights", d.fraction, total, used), closeAll())
	}
	return &deviceRunner{Runner: r, kvBytes: kv, memInfo: g.MemInfo, fraction: d.fraction, close: func() {
		if err := closeAll(); err != nil {
			log.Error("closing the GPU", "err", err)
		}
	}}, nil
}
