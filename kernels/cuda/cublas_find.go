package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// cublasMajors are the cuBLAS major versions tried, newest first: the v2
// API prefixd calls is the same in each.
var cublasMajors = []string{"13", "12", "11"}

// cublasSearch is where a machine keeps cuBLAS besides the dynamic
// linker's path: CUDA toolkits, and the Python wheels that PyTorch
// installs (nvidia-cublas-cu12 and its kin) or vendors. Each pattern is a
// glob under the file system's root; $VAR stands for an environment
// variable (the pattern is skipped when it is unset).
var cublasSearch = []string{
	"$CUDA_HOME/lib64", "$CUDA_PATH/lib64",
	"/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64", "/usr/local/cuda*/targets/x86_64-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
}

// pythonLibs are the folders under which Python packages live: the
// system's, pip's --user, conda's, pyenv's and virtual environments'.
var pythonLibs = []string{
	"/usr/lib/python3/dist-packages",
	"/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages",
	"/opt/conda/lib/python3*/*-packages", "/opt/*/lib/python3*/*-packages",
	"$HOME/.local/lib/python3*/*-packages", "$HOME/.pyenv/versions/*/lib/python3*/*-packages",
	"$VIRTUAL_ENV/lib/python3*/*-packages", "$CONDA_PREFIX/lib/python3*/*-packages",
}

// cublasCandidates returns the cuBLAS files to try, best first: for each
// major version, newest first, its bare name (which dlopen looks up on
// LD_LIBRARY_PATH and in the ldconfig cache), then the files of that
// version that ldconfig lists (its `ldconfig -p` output), that lie in a
// CUDA toolkit, or that lie in a Python package (nvidia/cublas/lib,
// torch/lib). root prefixes every searched path (tests use a folder; the
// real search uses ""); getenv reads the environment. A file reached by
// two paths is listed once.
func cublasCandidates(ldconfig, root string, getenv func(string) string) []string {
	var dirs []string
	expand := func(pattern string) []string {
		unset := false
		p := os.Expand(pattern, func(v string) string {
			s := getenv(v)
			unset = unset || s == ""
			return s
		})
		if unset {
			return nil
		}
		m, _ := filepath.Glob(filepath.Join(root, p))
		return m
	}
	for _, d := range cublasSearch {
		dirs = append(dirs, expand(d)...)
	}
	for _, py := range pythonLibs {
		for _, site := range expand(py) {
			dirs = append(dirs, filepath.Join(site, "nvidia", "cublas", "lib"), filepath.Join(site, "torch", "lib"))
		}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		key := p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			key = r
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, p)
		}
	}
	for _, v := range cublasMajors {
		name := "libcublas.so." + v
		add(name)
		for _, line := range strings.Split(ldconfig, "\n") {
			lib, path, ok := strings.Cut(strings.TrimSpace(line), " => ")
			if ok && strings.HasPrefix(lib, name+" ") && strings.Contains(lib, "x86-64") {
				add(filepath.Join(root, strings.TrimSpace(path)))
			}
		}
		for _, d := range dirs {
			files, _ := filepath.Glob(filepath.Join(d, name+"*"))
			slices.Sort(files) // the soname's link before its versioned files
			for _, f := range files {
				add(f)
			}
		}
	}
	return out
}

// ldconfigCache returns `ldconfig -p`'s listing, or "" where ldconfig is
// missing.
func ldconfigCache() string {
	for _, bin := range []string{"ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		out, err := exec.Command(bin, "-p").Output()
		if err == nil {
			return string(out)
		}
	}
	return ""
}

// cublasLibraries is cublasCandidates on this machine.
func cublasLibraries() []string {
	return cublasCandidates(ldconfigCache(), "", os.Getenv)
}
