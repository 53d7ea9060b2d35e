//go:build cgo && amd64

package emu

import (
	"errors"
	"fmt"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// capture is what the Device records between BeginCapture and
// EndCapture: the calls, and the first call a GPU would refuse to
// capture.
type capture struct {
	on    bool
	calls []call
	err   error
}

// call is one recorded launch, or with product set one MatMulT.
type call struct {
	kernel      string
	grid, block launch.Dim3
	args        []uint64
	product     bool
	beta        float32
}

// graph is a launch.Graph of the emulator.
type graph struct {
	d         *Device
	calls     []call
	destroyed bool
}

// BeginCapture makes the Device record its launches and products,
// checked as at launch, instead of running them, until EndCapture: CUDA's
// stream capture. As on a GPU, a copy, an allocation or a
// synchronisation is refused while it records, and fails the capture.
func (d *Device) BeginCapture() error {
	if d.cap.on {
		return errors.New("emu: BeginCapture while capturing")
	}
	d.cap = capture{on: true}
	return nil
}

// EndCapture stops recording and returns the recorded calls as a graph,
// or the error of the first call the capture refused.
func (d *Device) EndCapture() (launch.Graph, error) {
	if !d.cap.on {
		return nil, errors.New("emu: EndCapture without BeginCapture")
	}
	c := d.cap
	d.cap = capture{}
	if c.err != nil {
		return nil, fmt.Errorf("emu: capture invalidated: %w", c.err)
	}
	d.graphs++
	return &graph{d: d, calls: c.calls}, nil
}

// uncaptured returns an error, and fails the capture, when the Device is
// capturing: op (a copy, an allocation, a synchronisation) is not
// something a graph captured from a stream may hold.
func (d *Device) uncaptured(op string) error {
	if !d.cap.on {
		return nil
	}
	err := fmt.Errorf("emu: %s while capturing a graph", op)
	if d.cap.err == nil {
		d.cap.err = err
	}
	return err
}

// record appends a call to the capture, which owns c.args.
func (d *Device) record(c call) { d.cap.calls = append(d.cap.calls, c) }

// Launch runs the graph's calls in order.
func (g *graph) Launch() error {
	if g.destroyed {
		return errors.New("emu: launch of a destroyed graph")
	}
	if g.d.cap.on {
		return errors.New("emu: graph launch while capturing")
	}
	for _, c := range g.calls {
		var err error
		if c.product {
			a := c.args
			err = g.d.MatMulT(launch.Ptr(a[0]), launch.Ptr(a[1]), launch.Ptr(a[2]), int(a[3]), int(a[4]), int(a[5]), c.beta)
		} else {
			err = g.d.Launch(c.kernel, c.grid, c.block, c.args...)
		}
		if err != nil {
			return fmt.Errorf("emu: graph: %w", err)
		}
	}
	return nil
}

// Destroy releases the graph.
func (g *graph) Destroy() error {
	if g.destroyed {
		return errors.New("emu: graph destroyed twice")
	}
	g.destroyed = true
	g.d.graphs--
	return nil
}

// GraphsLive returns how many graphs EndCapture made are not yet
// destroyed.
func (d *Device) GraphsLive() int { return d.graphs }
