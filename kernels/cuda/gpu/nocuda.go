//go:build !cuda

package gpu

import (
	"errors"

	"github.com/prefixd/prefixd/kernels/cuda/src"
)

// Built says whether this binary has the GPU backend (the cuda build tag).
const Built = false

// ErrNotBuilt means the binary was built without the cuda tag.
var ErrNotBuilt = errors.New("gpu: this binary was built without the cuda build tag (go build -tags cuda, see README's GPU section)")

// OpenCUDA returns ErrNotBuilt: this binary has no GPU backend.
func OpenCUDA(int, src.DType) (GPU, error) { return nil, ErrNotBuilt }
