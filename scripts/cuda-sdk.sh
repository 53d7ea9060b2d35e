#!/usr/bin/env bash
# Fetches the CUDA 11.8 build kit that prefixd's `cuda` and `nvrtc` build
# tags need (headers, link stubs, NVRTC, a libcuda.so.1) from Debian
# bookworm's non-free component, once, into a cache folder, and prints the
# build environment as shell assignments:
#
#   eval "$(scripts/cuda-sdk.sh)"
#   go test -tags nvrtc ./kernels/cuda/...
#
# The packages are unpacked with dpkg-deb -x, never installed: installing
# them would pull in the NVIDIA driver. The cache folder is
# $PREFIXD_CUDA_SDK, or ~/.cache/prefixd-cuda-sdk; a second run reuses it and
# needs no network. Everything but the final assignments goes to stderr.
set -euo pipefail

dir="${PREFIXD_CUDA_SDK:-$HOME/.cache/prefixd-cuda-sdk}"
root="$dir/root"
stamp="$dir/.complete"
pkgs=(nvidia-cuda-dev libnvrtc11.2 libnvrtc-builtins11.8 libcudart11.0 libcuda1)
lib="$root/usr/lib/x86_64-linux-gnu"

if [ ! -f "$stamp" ]; then
	echo "cuda-sdk: fetching ${pkgs[*]} into $dir (about 800 MB, once)" >&2
	# Bookworm's contrib and non-free components, beside the system's own
	# sources file, with the same mirror and key.
	src=/etc/apt/sources.list.d/prefixd-cuda-nonfree.sources
	if [ ! -f "$src" ]; then
		uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
		cat >"$src" <<SRC
Types: deb
URIs: ${uri:-http://deb.debian.org/debian}
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	fi
	apt-get update -qq >&2
	mkdir -p "$dir/debs" "$root"
	(cd "$dir/debs" && apt-get download -qq -o APT::Sandbox::User=root "${pkgs[@]}" >&2)
	for deb in "$dir"/debs/*.deb; do
		dpkg-deb -x "$deb" "$root"
	done
	for f in "$root/usr/include/cuda.h" "$root/usr/include/nvrtc.h" "$root/usr/include/cublas_v2.h" \
		"$lib/stubs/libcuda.so" "$lib/libnvrtc.so.11.2" "$lib/libnvrtc-builtins.so.11.8"; do
		if [ ! -e "$f" ]; then
			echo "cuda-sdk: $f missing after unpacking; remove $dir and retry" >&2
			exit 1
		fi
	done
	# cgo links -lnvrtc: give the versioned library its development name.
	ln -sf libnvrtc.so.11.2 "$lib/libnvrtc.so"
	# The static libraries are most of the 2.8 GB and nothing links them.
	find "$root" -name "*.a" -delete
	rm -rf "$dir/debs"
	touch "$stamp"
fi

# The stubs come first so that -lcuda and -lcublas link against the stubs,
# and NVRTC is found beside them. At run time NVRTC and the driver library
# from the kit are on LD_LIBRARY_PATH: NVRTC compiles without a GPU.
printf 'export PREFIXD_CUDA_SDK=%q\n' "$dir"
printf 'export CGO_CFLAGS=%q\n' "-I$root/usr/include"
printf 'export CGO_LDFLAGS=%q\n' "-L$lib/stubs -L$lib"
printf 'export LD_LIBRARY_PATH=%q\n' "$lib:$lib/nvidia/current${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
