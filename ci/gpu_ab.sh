#!/usr/bin/env bash
# A/B of the CUDA kernels on a GPU machine, in one call: the working tree's
# build (ci/gpu_check.sh build) against a baseline libpackboost_cuda.so built
# from another revision's cuda/ sources, swapped in through LD_LIBRARY_PATH
# (which wins over the Python module's RUNPATH), alternating runs of
# benchmarks/bench_gpu.py. The C API must be the same in both (PBC_API_VERSION).
#
# The GPU machine has no git: export the baseline here first, into a folder
# that travels with the tree (ignored by git, carried by the device tool):
#
#   mkdir -p .ab/base && git archive REV cuda | tar -x -C .ab/base
#   ci/gpu_ab.sh                       # new, base, new, base at Numerai scale, ff 0.1
#   AB_RUNS="new base" BENCH_ARGS="--feature-fraction 0.1 1.0 --skip-cpu" ci/gpu_ab.sh
#
# Or the working tree's own sources with switches as the baseline (no export,
# and no C API mismatch), e.g. the histograms without pairs and per-row hessians:
#
#   AB_BASE=cuda AB_BASE_FLAGS="-DPBC_PAIR_MAX_WIDTH=0 -DPBC_HIST_CONSTANT_HESSIAN=0" ci/gpu_ab.sh
#
# Prints each run's trees/s and per-depth kernel table; `cuobjdump -sass` of
# both libraries' atomics first (what the compiler made of the adds).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${AB_BASE:-.ab/base/cuda}
[ -f "$BASE/histogram.cu" ] || { echo "no baseline sources in $BASE (see the header)"; exit 2; }
ci/gpu_check.sh build > "${OUT:-/tmp}/gpu_ab_build.log" 2>&1 \
    || { tail -30 "${OUT:-/tmp}/gpu_ab_build.log"; exit 1; }
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
mkdir -p .ab/lib
# shellcheck disable=SC2086  # AB_BASE_FLAGS: several -D flags
nvcc -gencode "arch=compute_$ARCH,code=sm_$ARCH" -O3 --fmad=false -shared -Xcompiler -fPIC \
    -Icsrc -I"$BASE" '-DPBC_BUILD_ARCH="baseline"' ${AB_BASE_FLAGS:-} \
    -o .ab/lib/libpackboost_cuda.so "$BASE"/*.cu
NEW=$(find build/gpu-check/stage -name 'libpackboost_cuda.so' | head -1)
for lib in "$NEW" .ab/lib/libpackboost_cuda.so; do
    echo "== $lib"
    cuobjdump -sass "$lib" | grep -oE "ATOMS\.[A-Z0-9.]+|ATOMG?\.[A-Z0-9.]+|RED\.[A-Z0-9.]+" \
        | sort | uniq -c || true
done
for run in ${AB_RUNS:-new base new base}; do
    echo "### $run"
    if [ "$run" = base ]; then
        export LD_LIBRARY_PATH=$PWD/.ab/lib
    else
        unset LD_LIBRARY_PATH
    fi
    BENCH_ARGS=${BENCH_ARGS:-"--feature-fraction 0.1 --skip-cpu --rounds 6"} \
        ci/gpu_check.sh bench 2>&1 | grep -E "'arch'|trees/s|^\| [0-9]|rror" || true
done
