// Package mmap brings model files read-only into memory, so the weight
// readers (safetensors, gguf) hand out slices of it: File maps the file
// shared, so resident memory follows what the kernels read and processes
// share the pages; Resident copies the bytes into the process's own
// memory in huge pages, where decoding, which reads every weight a token,
// runs faster; Move carries a parsed file's views over to such a copy.
package mmap
