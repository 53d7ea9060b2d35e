package main

import (
	"errors"
	"flag"
	"log/slog"

	"github.com/prefixd/prefixd/kernels/cpu"
	"github.com/prefixd/prefixd/kernels/cuda/gpu"
	"github.com/prefixd/prefixd/kernels/cuda/src"
	"github.com/prefixd/prefixd/model"
)

// deviceFlags choose where the model runs: --device, and for a GPU the
// share of its memory prefixd may use and the element type of weights and
// K/V. serve, generate and bench share them.
type deviceFlags struct {
	device   string
	fraction float64
	dtype    string
}

func (d *deviceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.device, "device", "cpu", "where the model runs: cpu, or cuda (GPU 0; needs a binary built with -tags cuda)")
	fs.Float64Var(&d.fraction, "gpu-memory-fraction", 0.9, "with --device cuda: the share of the GPU's memory prefixd may use; the KV pool gets what the weights leave of it")
	fs.StringVar(&d.dtype, "gpu-dtype", "bf16", "with --device cuda: element type of weights and K/V: bf16, f16 or f32")
}

// check validates the flags; --device cuda in a binary without the GPU
// backend is a usage error that says so.
func (d *deviceFlags) check() error {
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

// deviceRunner is a model runner on the chosen device.
type deviceRunner struct {
	*model.Runner
	// kvBytes is, on a GPU, the device memory left for the K/V pool; 0
	// on the CPU, whose pool the command sizes itself.
	kvBytes int64
	// memInfo reports the GPU's free and total memory; nil on the CPU.
	memInfo func() (free, total int64, err error)
	close   func()
}

// runner uploads m to the device and returns its runner; on a GPU it logs
// the device's memory and sizes the K/V pool's share of it.
func (d *deviceFlags) runner(m *model.Model, threads int, log *slog.Logger) (*deviceRunner, error) {
	if d.device != "cuda" {
		w := cpu.NewWorkers(threads)
		return &deviceRunner{Runner: model.NewRunner(m, w), close: w.Close}, nil
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
	return &deviceRunner{Runner: r, kvBytes: kv, memInfo: g.MemInfo, close: func() {
		if err := closeAll(); err != nil {
			log.Error("closing the GPU", "err", err)
		}
	}}, nil
}
