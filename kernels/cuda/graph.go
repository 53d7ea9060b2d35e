//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// Thread-local capture: only calls from the capturing thread (the
// device thread) that are unsafe while capturing fail it.
static int prefixd_begin_capture(CUstream s) { return (int)cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); }

// prefixd_end_capture ends the capture on s and instantiates the graph it
// made, which is no longer needed once instantiated.
static int prefixd_end_capture(CUstream s, CUgraphExec *exec) {
	CUgraph g = NULL;
	CUresult rc = cuStreamEndCapture(s, &g);
	if (rc == CUDA_SUCCESS) rc = cuGraphInstantiateWithFlags(exec, g, 0);
	if (g != NULL) cuGraphDestroy(g);
	return (int)rc;
}

static int prefixd_graph_launch(CUgraphExec e, CUstream s) { return (int)cuGraphLaunch(e, s); }
static int prefixd_graph_destroy(CUgraphExec e) { return (int)cuGraphExecDestroy(e); }
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/prefixd/prefixd/kernels/cuda/launch"
)

// cstream returns the device's stream as this package's C type: a
// cu.Stream holds just the CUstream.
func (d *Device) cstream() C.CUstream { return *(*C.CUstream)(unsafe.Pointer(&d.stream)) }

// BeginCapture makes the launches and products queued on the device's
// stream record into a graph instead of running, until EndCapture (CUDA
// stream capture, thread-local). It makes the cuBLAS handle first: making
// it would allocate, which a capture refuses. Copies, allocations and
// synchronisations on the device thread fail the capture.
func (x *Exec) BeginCapture() error {
	if err := x.d.blas.handle(x.d.blasStream()); err != nil {
		return err
	}
	if rc := C.prefixd_begin_capture(x.d.cstream()); rc != 0 {
		return fmt.Errorf("cuda: cuStreamBeginCapture: CUresult %d", int(rc))
	}
	return nil
}

// EndCapture ends the capture and returns its graph, instantiated; its
// Launch and Destroy must run on the device thread (inside Do).
func (x *Exec) EndCapture() (launch.Graph, error) {
	var e C.CUgraphExec
	if rc := C.prefixd_end_capture(x.d.cstream(), &e); rc != 0 {
		return nil, fmt.Errorf("cuda: ending a graph capture: CUresult %d", int(rc))
	}
	return &graph{d: x.d, e: e}, nil
}

// graph is an instantiated CUDA graph of a Device.
type graph struct {
	d *Device
	e C.CUgraphExec
}

// Launch queues the graph on the device's stream.
func (g *graph) Launch() error {
	if rc := C.prefixd_graph_launch(g.e, g.d.cstream()); rc != 0 {
		return fmt.Errorf("cuda: cuGraphLaunch: CUresult %d", int(rc))
	}
	return nil
}

// Destroy releases the graph.
func (g *graph) Destroy() error {
	if rc := C.prefixd_graph_destroy(g.e); rc != 0 {
		return fmt.Errorf("cuda: cuGraphExecDestroy: CUresult %d", int(rc))
	}
	return nil
}
