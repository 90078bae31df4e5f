#!/usr/bin/env bash
# GPU check of the CUDA backend (issue 8), in one call on a machine with an
# NVIDIA GPU and the CUDA toolkit, without internet:
#
#   ci/gpu_check.sh            # build + tests + sanitizers + benchmark (Numerai scale)
#   ci/gpu_check.sh build test # only some stages; BENCH_ARGS="..." for the benchmark
#   ci/gpu_check.sh sanitize   # compute-sanitizer memcheck + racecheck on the CUDA tests
#
# Build: Meson directly (no pip, nothing downloaded) with -Dcuda=enabled, for
# the GPU's own architecture, into build/gpu-check/ (git-ignored, kept between
# calls), then `meson install --destdir` into its stage/: the installed layout, so the
# $ORIGIN rpath of packboost/_cuda*.so -> libpackboost_cuda.so is what is
# tested. Needs python3 with numpy, meson>=1.12, ninja, Cython>=3.0.10, pytest
# (and scikit-learn for the estimator tests); it says which one is missing.
# meson-python and pyproject-metadata too, or the tests that build the host
# oracle (tests/oracles/_build.py) skip: on an offline machine, install wheels
# of all of these with `pip install --no-index --target DIR` and put DIR on
# PYTHONPATH and DIR/bin on PATH before calling this script.
# Logs and the benchmark's JSON go to $OUT (the device tool's output folder)
# or build/gpu-check-out/. GPU_CHECK_NO_GPU=1 rehearses the script without a GPU
# (GPU tests skip; use BENCH_ARGS="--emulate ..." for the benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${OUT:-$ROOT/build/gpu-check-out}
BUILD=${BUILD_DIR:-$ROOT/build/gpu-check}
STAGES=${*:-build test sanitize bench}
mkdir -p "$OUT_DIR"
log() { echo "[gpu_check $(date -u +%H:%M:%S)] $*"; }
# python3 -P (never the source tree) with an editable packboost install, if
# any, out of the way: `pyrun -m pytest ...` or `pyrun script.py ...`.
PYRUN='
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "MesonpyMetaFinder"]
if sys.argv[1] == "-m":
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
'
pyrun() { python3 -P -c "$PYRUN" "$@"; }

if ! command -v nvcc >/dev/null 2>&1; then
    for dir in /usr/local/cuda/bin /usr/local/cuda-*/bin /opt/cuda/bin; do
        if [ -x "$dir/nvcc" ]; then export PATH="$dir:$PATH"; break; fi
    done
fi
command -v nvcc >/dev/null || { echo "nvcc not found (CUDA toolkit)"; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv \
    | tee "$OUT_DIR/gpu.txt" || true
nvcc --version | tail -2
python3 - <<'EOF'
import importlib, sys
missing = [name for name in ("numpy", "mesonbuild", "Cython", "pytest")
           if importlib.util.find_spec(name) is None]
if missing:
    sys.exit(f"missing Python packages: {missing} (carry a venv or install them)")
EOF
command -v ninja >/dev/null || python3 -c "import ninja" || { echo "ninja missing"; exit 2; }
MESON="python3 -m mesonbuild.mesonmain"

# The GPU's compute capability, e.g. 9.0 -> gpu_arch 9.0 (fast build, native code).
ARCH=${GPU_ARCH:-$( (nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
                     || true) | head -1 | tr -d ' ')}
ARCH=${ARCH:-9.0}

if [[ " $STAGES " == *" build "* ]]; then
    log "build: -Dcuda=enabled -Dgpu_arch=$ARCH into $BUILD"
    start=$(date +%s)
    if [ -f "$BUILD/build.ninja" ]; then
        $MESON configure "$BUILD" -Dcuda=enabled "-Dgpu_arch=$ARCH"
    else
        $MESON setup "$BUILD" -Dcuda=enabled "-Dgpu_arch=$ARCH" --prefix=/usr \
            -Dpython.install_env=auto
    fi
    $MESON compile -C "$BUILD" 2>&1 | tail -5
    rm -rf "$BUILD/stage"
    $MESON install -C "$BUILD" --destdir "$BUILD/stage" --quiet
    log "build took $(( $(date +%s) - start )) s"
fi

PKG_INIT=$(find "$BUILD/stage" -path '*/packboost/__init__.py' | head -1)
[ -n "$PKG_INIT" ] || { echo "no staged install in $BUILD/stage: run the build stage"; exit 2; }
SITE=$(dirname "$(dirname "$PKG_INIT")")
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
log "packboost from $SITE"
readelf -d "$SITE"/packboost/_cuda*.so | grep -E 'RUNPATH|RPATH' || true
cat > "$BUILD/sanity.py" <<'EOF'
import os
import packboost
import packboost._device as device
assert "stage" in packboost.__file__, packboost.__file__
info = device.cuda_build_info()
print(packboost.__file__, info)
assert info["built"], info["error"]
# GPU_CHECK_NO_GPU=1: rehearse this script on a machine without a GPU.
assert info["available"] or os.environ.get("GPU_CHECK_NO_GPU"), info["error"]
EOF
pyrun "$BUILD/sanity.py"

if [[ " $STAGES " == *" test "* ]]; then
    log "tests: tests/test_cuda.py (all, GPU parity included) + estimator tests on the build"
    set +e
    pyrun -m pytest -q -p no:cacheprovider -ra tests/test_cuda.py 2>&1 \
        | tee "$OUT_DIR/test_cuda.log" | tail -25
    status=${PIPESTATUS[0]}
    set -e
    if [ "$status" -ne 0 ]; then log "CUDA tests FAILED"; exit "$status"; fi
    if [ -z "${GPU_CHECK_NO_GPU:-}" ] && grep -q "needs a usable CUDA GPU" \
            "$OUT_DIR/test_cuda.log"; then
        log "GPU tests were skipped: the GPU is not usable"; exit 3
    fi
    pyrun -m pytest -q -p no:cacheprovider -x tests/test_sklearn.py tests/test_grower.py \
        2>&1 | tail -3
    # The GPU cases of the other suites (device="cuda" estimators, CLI, files).
    pyrun -m pytest -q -p no:cacheprovider -ra tests/test_cli.py tests/test_constraints.py \
        tests/test_model_io.py tests/test_packaging.py -k "cuda or gpu or device" 2>&1 \
        | tee "$OUT_DIR/test_gpu_cases.log" | tail -8
fi

if [[ " $STAGES " == *" sanitize "* ]]; then
    # Every launch of the CUDA tests under compute-sanitizer: memcheck (out of
    # bounds, misaligned, leaks of device memory) and racecheck (shared-memory
    # hazards). A report fails the stage (--error-exitcode).
    SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
    [ -n "$SANITIZER" ] || { echo "compute-sanitizer not found"; exit 2; }
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        # racecheck tracks every shared-memory access: the parity cases only
        # (~20 s on an H100) unless SANITIZE_ARGS says otherwise.
        args=${SANITIZE_ARGS:-}
        if [ "$tool" = racecheck ] && [ -z "$args" ]; then args="-k test_gpu_grows_the_cpu_pack"; fi
        log "compute-sanitizer --tool $tool: tests/test_cuda.py $args"
        set +e
        # shellcheck disable=SC2086
        timeout "${SANITIZE_TIMEOUT:-300}" "$SANITIZER" --tool "$tool" --error-exitcode 99 \
            --target-processes all python3 -P -c "$PYRUN" -m pytest -q -p no:cacheprovider \
            tests/test_cuda.py $args > "$OUT_DIR/sanitize_$tool.log" 2>&1
        status=$?
        set -e
        tail -15 "$OUT_DIR/sanitize_$tool.log"
        log "$tool exit status $status"
        [ "$status" -eq 0 ] || sanitize_failed=1
    done
    [ -z "${sanitize_failed:-}" ] || { log "compute-sanitizer FAILED"; exit 4; }
fi

if [[ " $STAGES " == *" bench "* ]]; then
    log "benchmark: benchmarks/bench_gpu.py ${BENCH_ARGS:-}"
    # shellcheck disable=SC2086
    pyrun benchmarks/bench_gpu.py --json "$OUT_DIR/bench_gpu.json" ${BENCH_ARGS:-} \
        2>&1 | tee "$OUT_DIR/bench_gpu.log"
fi
log "done"
