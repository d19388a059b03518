#!/usr/bin/env bash
# The GPU bundle (make gpu-bundle, docs/cuda.md): rmt, librmt_cuda.so and the GPU suite built here
# for any x86-64 CPU (no -march=native), staged into one folder with every shared library they need
# that a bare GPU machine lacks, so that the folder alone can be carried to a machine that has only
# a CUDA driver and pip's cuBLAS (no toolkit, no development packages) and run there with
# `bash gpu-bundle/run.sh` (tools/gpu_bundle_run.sh, copied in as run.sh).
#
#   tools/gpu_bundle.sh [BUILD_DIR [OUT_DIR]]            configure and build BUILD_DIR (default
#                                                        build-gpu-bundle), then stage OUT_DIR
#                                                        (default gpu-bundle)
#   tools/gpu_bundle.sh --stage-only BUILD_DIR OUT_DIR   only stage programs already built in
#                                                        BUILD_DIR (the test in make test does this)
#
# What goes in: the three programs, and in lib/ every library `ldd` shows for them except
#   - glibc's own (libc, libm, libdl, libpthread, librt, the loader): they must be the host's,
#     matching its loader; the newest glibc symbol version the bundle needs is written to
#     glibc_required, and run.sh compares it with the host's;
#   - libcuda.so.1 (the driver's; the CUDA runtime is linked into librmt_cuda.so statically);
#   - cuBLAS (libcublas.so.13, libcublasLt.so.13: over 500 MB; the GPU machine has it from pip,
#     and run.sh finds it).
# libstdc++ and libgcc_s go to lib/compat, a fallback: the programs need this g++'s GLIBCXX
# symbols, which an older host lacks; but this system's copies need a newer glibc (2.36 on Debian
# 12: arc4random) than the programs themselves (2.34), so on a host with glibc 2.34 or 2.35 and a
# recent libstdc++ (Ubuntu 22.04 with PyTorch) the host's must be used. run.sh uses the host's when
# the programs start with them, else the bundle's (newer libstdc++ are backward compatible, and
# only rmt's own processes see the bundle's libraries).
# The whole folder must fit in what can be carried (BUNDLE_LIMIT_MIB, default 64): the script
# fails, saying so, when it does not.
set -euo pipefail

die() { echo "gpu_bundle: error: $*" >&2; exit 1; }

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
limit_mib=${BUNDLE_LIMIT_MIB:-64}

stage_only=0
if [ "${1:-}" = "--stage-only" ]; then
  [ $# -eq 3 ] || die "usage: tools/gpu_bundle.sh --stage-only BUILD_DIR OUT_DIR"
  stage_only=1
  shift
fi
usage="usage: tools/gpu_bundle.sh [BUILD_DIR [OUT_DIR]] | --stage-only BUILD_DIR OUT_DIR"
[ $# -le 2 ] || die "$usage"
for a in "$@"; do case "$a" in -*) die "$usage" ;; esac; done
build=${1:-$root/build-gpu-bundle}
out=${2:-$root/gpu-bundle}

# ---- build: portable, with the CUDA backend, programs looking in $ORIGIN/lib first ------------
if [ $stage_only = 0 ]; then
  jobs=${JOBS:-$(nproc)}
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DRMT_NATIVE=OFF -DRMT_CUDA=ON \
        -DRMT_BUNDLE_RPATH=ON
  cmake --build "$build" -j "$jobs" --target rmt rmt_cuda rmt_cuda_tests
fi

programs=(rmt librmt_cuda.so rmt_cuda_tests)
for p in "${programs[@]}"; do
  [ -f "$build/$p" ] || die "$build/$p is missing: build it first (a build with the CUDA backend: make CUDA=1)"
done

# ---- stage ---------------------------------------------------------------------------------
# OUT_DIR is replaced whole; only a folder this script made (it has .rmt-gpu-bundle) or an empty
# one, so that a mistyped path cannot remove anything else.
if [ -e "$out" ]; then
  [ -d "$out" ] || die "$out exists and is not a folder"
  if [ -n "$(ls -A "$out")" ] && [ ! -f "$out/.rmt-gpu-bundle" ]; then
    die "$out is not empty and was not made by this script (no .rmt-gpu-bundle): not replacing it"
  fi
  rm -rf "$out"
fi
mkdir -p "$out/lib/compat"
touch "$out/.rmt-gpu-bundle"

for p in "${programs[@]}"; do cp "$build/$p" "$out/$p"; done
cp "$here/gpu_bundle_run.sh" "$out/run.sh"
chmod +x "$out/run.sh"

# Libraries a bare GPU machine has, or that must not travel (see the top).
host_provided() {
  case "$1" in
    linux-vdso.so.*|ld-linux-x86-64.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*) return 0 ;;
    libcuda.so.*|libcublas.so.*|libcublasLt.so.*) return 0 ;;
  esac
  return 1
}

# Every "name => path" ldd prints (it lists the whole tree, not only direct needs); the library is
# copied under the name the programs ask for, following symlinks.
for p in "${programs[@]}"; do
  ldd_out=$(ldd "$build/$p") || die "ldd $build/$p failed"
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    host_provided "$name" && continue
    [ "$path" != "not" ] || die "$p needs $name, which is not found on this machine (ldd $build/$p)"
    case "$name" in
      libstdc++.so.*|libgcc_s.so.*) dest=$out/lib/compat ;;
      *) dest=$out/lib ;;
    esac
    [ -f "$dest/$name" ] || cp -L "$path" "$dest/$name"
  done <<< "$ldd_out"
done

# The newest GLIBC_x.y symbol version the given files ask for.
newest_glibc() {
  for f in "$@"; do objdump -T "$f" 2> /dev/null | grep -o 'GLIBC_[0-9][0-9.]*' || true; done |
    sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1
}
glibc=$(newest_glibc "$out"/rmt "$out"/librmt_cuda.so "$out"/rmt_cuda_tests "$out"/lib/*.so*)
glibc_compat=$(newest_glibc "$out"/lib/compat/*)
echo "${glibc:-unknown}" > "$out/glibc_required"

# What is in it, for the log on the GPU machine.
{
  echo "rmt GPU bundle: rmt $(env LD_LIBRARY_PATH="$out/lib:$out/lib/compat" "$out/rmt" --version 2> /dev/null | sed -n 's/^commit: //p'), staged $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n) from $build"
  echo "needs glibc >= ${glibc:-unknown} (>= ${glibc_compat:-unknown} where the host's libstdc++ is older than g++ $(gcc -dumpversion 2> /dev/null || echo '?')'s and lib/compat's is used), an NVIDIA driver, and cuBLAS 13 (libcublas.so.13, libcublasLt.so.13)"
  (cd "$out" && find . -type f ! -name .rmt-gpu-bundle ! -name MANIFEST -printf '%s %P\n' | sort -k2 |
     awk '{ printf "%8.2f MiB  %s\n", $1 / 1048576, $2 }')
} > "$out/MANIFEST"

bytes=$(du -sb "$out" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  cat "$out/MANIFEST" >&2
  die "$out is $mib MiB, over the $limit_mib MiB that can be carried to the GPU machine"
fi
echo "gpu_bundle: $out: $mib MiB (limit $limit_mib MiB); libraries: $(cd "$out/lib" && find . -type f -printf '%P\n' | sort | tr '\n' ' '); needs glibc >= ${glibc:-unknown}"
echo "gpu_bundle: on the GPU machine: bash $(basename "$out")/run.sh"

# The same folder packed (about a third of its size: oneDNN compresses well), for when the bundle
# must travel beside other things, such as the paper-scale cell's training state
# (docs/cuda.md, "The paper-scale cell"): carry OUT_DIR.tar.gz and unpack it there first.
if [ $stage_only = 0 ]; then
  tar -C "$(dirname "$out")" -czf "$out.tar.gz.tmp" "$(basename "$out")" && mv "$out.tar.gz.tmp" "$out.tar.gz" ||
    die "could not write $out.tar.gz"
  echo "gpu_bundle: $out.tar.gz: $(du -m "$out.tar.gz" | cut -f1) MiB; on the GPU machine: tar xzf $(basename "$out").tar.gz && bash $(basename "$out")/run.sh"
fi
