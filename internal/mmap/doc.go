// Package mmap maps model files read-only into memory, so the weight
// readers (safetensors, gguf) hand out slices of the file without copying
// it and resident memory follows what the kernels read.
package mmap
