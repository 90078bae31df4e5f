#!/usr/bin/env bash
# Run the GPU tests without a GPU: the CUDA backend's own sources (cuda/*.cu)
# compiled by g++ against tests/cuda_stub/fake_cuda.h, a host-thread stand-in
# for the CUDA runtime (one std::thread per CUDA thread, barriers for
# __syncthreads, __syncwarp and warp shuffles; a test tool, never installed:
# cuda/internal.cuh includes it under -DPBC_FAKE_CUDA, found through
# -Itests/cuda_stub), then loaded in place of the real
# libpackboost_cuda.so through LD_LIBRARY_PATH (which wins over the Python
# module's RUNPATH). The tests marked `cuda` then drive the real C API, the
# real launchers and kernels: indexing, shared-memory layouts, feature chunks,
# warp reductions, routing, prediction.
#
#   ci/cuda_on_cpu.sh                 # the pack, kernel and predict tests (~3 min)
#   ci/cuda_on_cpu.sh -k predict      # any selection of the -m cuda tests of
#                                     # tests/test_cuda.py and tests/test_device_round.py
#
# The estimator-level tests (255 bins: thousands of warp shuffles per tile,
# each a barrier of 32 OS threads here) take too long for the default.
#
# It needs the CUDA backend built into the installed packboost (the module
# packboost._cuda: a build with nvcc) and g++ >= 11. It proves logic, not
# speed, not the GPU memory model and not races between blocks: the real
# check is ci/gpu_check.sh on a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
LIB_DIR=${FAKE_CUDA_DIR:-/tmp/packboost-fake-cuda}
mkdir -p "$LIB_DIR"
g++ -std=c++20 -O1 -DPBC_FAKE_CUDA '-DPBC_BUILD_ARCH="fake (host threads)"' -x c++ \
    -Icsrc -Icuda -Itests/cuda_stub -fPIC -shared -pthread -o "$LIB_DIR/libpackboost_cuda.so" \
    cuda/context.cu cuda/histogram.cu cuda/split.cu cuda/partition.cu cuda/predict.cu cuda/round.cu
LD_LIBRARY_PATH="$LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" python3 - <<'EOF'
from packboost import _device
info = _device.cuda_build_info()
assert info["devices"] == ["fake CUDA device (host threads)"], info
print("fake CUDA device loaded:", info["arch"])
EOF
# One core, low priority: every CUDA thread of a block is an OS thread here.
LD_LIBRARY_PATH="$LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    taskset -c 0 nice -n 19 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py \
    tests/test_device_round.py -m cuda \
    "${@:--kgrows_the_cpu_pack or predict or context_kernels or device_round or samples_from_flags or device_pack or round_on_the_device}"
