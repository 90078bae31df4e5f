#!/usr/bin/env bash
# GPU check of the CUDA backend, in one call on a machine with an NVIDIA GPU
# and the CUDA toolkit, without internet:
#
#   ci/gpu_check.sh            # build + tests + sanitizers + benchmark (Numerai scale)
#   ci/gpu_check.sh peers build parity bench   # the one-call measurement below
#   ci/gpu_check.sh build test # only some stages; BENCH_ARGS="..." for the benchmark
#   ci/gpu_check.sh sanitize   # compute-sanitizer memcheck + racecheck on the CUDA tests
#
# Stages (run in this order, whatever order they are named in):
#   peers     install the wheels carried in .whl/ (WHEEL_DIR) into /tmp/site
#             (PEER_SITE) and put it on PYTHONPATH: XGBoost for the benchmark's
#             peer, meson-python and pyproject-metadata for the tests that
#             build the host oracle; then says which XGBoost imports, and
#             whether it has CUDA (peers.txt)
#   build     Meson for the GPU's own architecture, staged install
#   parity    tests/test_cuda.py: every GPU parity case (must not skip on a GPU),
#             stopped after PARITY_TIMEOUT seconds if set
#   test      parity + the estimator and grower suites + the GPU cases of the others
#   sanitize  compute-sanitizer memcheck and racecheck
#   dask      benchmarks/bench_dask.py with DASK_ARGS on the machine's CPU cores
#             (default: the local fit on 16 threads against 1 Dask worker x 16
#             threads, 2 x 8 and 8 x 2), dask/distributed from .whl/dask/; after
#             DASK_TIMEOUT seconds if set; JSON in bench_dask.json
#   bench     benchmarks/bench_gpu.py with BENCH_ARGS (default: the plan below),
#             stopped after BENCH_TIMEOUT seconds if set; its JSON is
#             rewritten after every fit, so a stopped run keeps what it measured
#
# THE ONE-CALL MEASUREMENT (<= 10 minutes of one H100, 16 cores)
# ----------------------------------------------------------------
# The GPU machine has no network and the call carries at most 64 MiB with
# the working tree (~3 MiB). Before the call, where pip reaches PyPI, fetch
# XGBoost's wheel (57.6 MB; its PyPI build ships CUDA; it needs numpy, scipy
# and nvidia-nccl-cu13, which the GPU machine's Python 3.12 already has) into
# .whl/ (git-ignored), with meson-python and pyproject-metadata if the image
# lacks them (both pure Python, ~0.1 MB):
#
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 -d .whl xgboost==3.4.1
#   python3 -m pip download --no-deps -d .whl meson-python pyproject-metadata
#
# then one call of the device tool with carry [".whl"] and a 600 s limit:
#
#   PARITY_TIMEOUT=150 BENCH_TIMEOUT=330 ci/gpu_check.sh peers build parity bench
#
# (a stage stopped by its limit is logged and the next one runs; after a
# failing parity test the later stages run too and the call exits with the
# tests' status). The peers stage installs them there with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site
#
# | stage | runs | estimate | from |
# | --- | --- | ---: | --- |
# | peers | unpack 3 wheels (XGBoost's libxgboost.so is 86 MB) | 15 s | |
# | build | Meson + nvcc for sm_90 | 30-60 s | build 26, 34, 55, 58 s on H100s (benchmarks/RESULTS.md, 2026-11-26 to 11-27) |
# | parity | tests/test_cuda.py, tests/test_device_round.py (host oracle built at test time, GPU parity at 600 eras) | 60-90 s | not timed alone before; the CUDA tests took ~20 s under racecheck's parity selection |
# | bench | data: 2.7M x 2,376 + 270k held-out rows | 20 s | |
# | | depth 6, pack 8, ff 0.1: PackBoost GPU 6 rounds + 2 timed, again 6 rounds with the gradients on the host (--host-round), CPU 16 threads 1 round, XGBoost 48 trees (+ its QuantileDMatrix, once) | 75 s | GPU 157 ms a round, CPU 0.7 s (2026-11-26 b4a5c88) |
# | | example recipe (depth 5, ff 0.1), 320 trees, both libraries | 30 s | PackBoost ~60 trees/s, XGBoost unmeasured |
# | | deep recipe (depth 10, 10,000 rows a leaf), 320 trees, both | 60-150 s | never run on a GPU; XGBoost 4.3 trees/s on 2x larger data (public figure) |
# | total | | ~300-500 s of the 600 | the two limits keep it under 600 s |
#
# The 16-core Dask scaling (carry .whl with .whl/dask/, ~5 MB more) is a second
# call: `DASK_TIMEOUT=420 ci/gpu_check.sh build dask` (build ~60 s; medium,
# 10 rounds, 1 worker x 16 threads, 2 x 8 and 8 x 2 against the local fit on 16
# threads: a few minutes, never measured on 16 cores yet).
#
# Not in that call (another one): sanitize (~3-5 minutes), the `test` stage's
# estimator suites, feature fraction 1.0 (BENCH_ARGS="--feature-fraction 1.0").
#
# What to look at in $OUT afterwards:
# * stages.txt: seconds per stage (the next plan's estimates);
# * gpu.txt, peers.txt: the card, XGBoost's version and "USE_CUDA True";
# * test_cuda.log: all passed, and no "needs a usable CUDA GPU" skip; among
#   them test_gpu_grows_the_deep_cpu_pack (depth 10, pack 8, over 1,536 slots
#   a depth: the slot sums in global memory, as in the deep recipe; never run
#   on a GPU before);
# * bench_gpu.log and bench_gpu.json: "speed" -> gpu_loop_trees_per_s (the
#   whole loop; target >= 400 trees/s, 57.9 on 2026-11-26 b4a5c88),
#   gpu_loop_over_grow (the round on the device: target >= 0.95; 0.83 then)
#   beside gpu_host_round_loop_trees_per_s (the same fit, gradients on the host),
#   cpu_trees_per_s (target: GPU >= 20x), peer.steady_trees_per_s,
#   same_splits "same"; "recipes" -> whole_fit_ratio (target >= 10x XGBoost)
#   with packboost_gpu and peer holdout_corr_mean / holdout_corr_sharpe
#   (PackBoost's at least the peer's); a MemoryError at the deep recipe
#   names what would fit (docs/cuda-kernels.md §11).
#
# Build: Meson directly (no pip, nothing downloaded) with -Dcuda=enabled, for
# the GPU's own architecture, into build/gpu-check/ (git-ignored, kept between
# calls), then `meson install --destdir` into its stage/: the installed layout, so the
# $ORIGIN rpath of packboost/_cuda*.so -> libpackboost_cuda.so is what is
# tested. Needs python3 with numpy, meson>=1.12, ninja, Cython>=3.0.10, pytest
# (and scikit-learn for the estimator tests); it says which one is missing.
# meson-python and pyproject-metadata too, or the tests that build the host
# oracle (tests/oracles/_build.py) skip (the peers stage installs carried ones).
# Logs and the benchmark's JSON go to $OUT (the device tool's output folder)
# or build/gpu-check-out/. GPU_CHECK_NO_GPU=1 rehearses the script without a GPU
# (GPU tests skip; use BENCH_ARGS="--emulate --peer-device cpu ..." for the
# benchmark, WHEEL_DIR=an empty folder where the carried wheels do not suit
# this Python).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT_DIR=${OUT:-$ROOT/build/gpu-check-out}
BUILD=${BUILD_DIR:-$ROOT/build/gpu-check}
STAGES=${*:-build test sanitize bench}
mkdir -p "$OUT_DIR"
log() { echo "[gpu_check $(date -u +%H:%M:%S)] $*"; }
# Seconds per stage, in $OUT/stages.txt: `stage_begin NAME` ... `stage_end`.
stage_begin() { STAGE_NAME=$1; STAGE_START=$(date +%s); }
stage_end() {
    echo "$STAGE_NAME $(( $(date +%s) - STAGE_START )) s ${1:-}" | tee -a "$OUT_DIR/stages.txt"
}
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }
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

if has_stage peers; then
    # Wheels carried to a machine without network (see the plan above).
    stage_begin peers
    PEER_SITE=${PEER_SITE:-/tmp/site}
    shopt -s nullglob
    wheels=("${WHEEL_DIR:-$ROOT/.whl}"/*.whl)
    shopt -u nullglob
    if [ ${#wheels[@]} -gt 0 ]; then
        log "peers: ${#wheels[@]} wheel(s) into $PEER_SITE: ${wheels[*]##*/}"
        if python3 -m pip install -q --no-index --no-deps --target "$PEER_SITE" "${wheels[@]}"; then
            export PYTHONPATH="$PEER_SITE${PYTHONPATH:+:$PYTHONPATH}"
            export PATH="$PEER_SITE/bin:$PATH"
        else
            log "peers: installing the wheels FAILED"
        fi
    else
        log "peers: no wheel in ${WHEEL_DIR:-$ROOT/.whl}"
    fi
    python3 -c 'import xgboost; print("xgboost", xgboost.__version__, xgboost.__file__, "USE_CUDA",
                xgboost.build_info().get("USE_CUDA"))' 2>&1 | tail -1 | tee "$OUT_DIR/peers.txt" \
        || log "peers: XGBoost does not import: the benchmark runs without its peer"
    stage_end
fi

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

if has_stage build; then
    log "build: -Dcuda=enabled -Dgpu_arch=$ARCH into $BUILD"
    stage_begin build
    if [ -f "$BUILD/build.ninja" ]; then
        $MESON configure "$BUILD" -Dcuda=enabled "-Dgpu_arch=$ARCH"
    else
        $MESON setup "$BUILD" -Dcuda=enabled "-Dgpu_arch=$ARCH" --prefix=/usr \
            -Dpython.install_env=auto
    fi
    $MESON compile -C "$BUILD" 2>&1 | tail -5
    rm -rf "$BUILD/stage"
    $MESON install -C "$BUILD" --destdir "$BUILD/stage" --quiet
    stage_end
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

if has_stage parity || has_stage test; then
    log "parity: tests/test_cuda.py and tests/test_device_round.py (all, GPU parity included) on the build"
    stage_begin parity
    set +e
    timeout "${PARITY_TIMEOUT:-0}" python3 -P -c "$PYRUN" -m pytest -q -p no:cacheprovider -ra \
        tests/test_cuda.py tests/test_device_round.py 2>&1 | tee "$OUT_DIR/test_cuda.log" | tail -25
    status=${PIPESTATUS[0]}
    set -e
    stage_end "(exit status $status)"
    if [ "$status" -eq 124 ]; then
        log "CUDA tests stopped after PARITY_TIMEOUT=$PARITY_TIMEOUT s (test_cuda.log: what ran)"
    elif [ "$status" -ne 0 ]; then
        # The later stages still run (a device call is scarce); the call fails at the end.
        log "CUDA tests FAILED (exit status $status)"; failed=$status
    fi
    if [ -z "${GPU_CHECK_NO_GPU:-}" ] && grep -q "needs a usable CUDA GPU" \
            "$OUT_DIR/test_cuda.log"; then
        log "GPU tests were skipped: the GPU is not usable"; exit 3
    fi
fi

if has_stage test; then
    log "tests: estimator and grower suites, and the GPU cases of the others, on the build"
    stage_begin test
    pyrun -m pytest -q -p no:cacheprovider -x tests/test_sklearn.py tests/test_grower.py \
        2>&1 | tail -3
    # The GPU cases of the other suites (device="cuda" estimators, CLI, files).
    pyrun -m pytest -q -p no:cacheprovider -ra tests/test_cli.py tests/test_constraints.py \
        tests/test_model_io.py tests/test_packaging.py -k "cuda or gpu or device" 2>&1 \
        | tee "$OUT_DIR/test_gpu_cases.log" | tail -8
    stage_end
fi

if has_stage sanitize; then
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
            tests/test_cuda.py tests/test_device_round.py $args > "$OUT_DIR/sanitize_$tool.log" 2>&1
        status=$?
        set -e
        tail -15 "$OUT_DIR/sanitize_$tool.log"
        log "$tool exit status $status"
        [ "$status" -eq 0 ] || sanitize_failed=1
    done
    [ -z "${sanitize_failed:-}" ] || { log "compute-sanitizer FAILED"; exit 4; }
fi

if has_stage bench; then
    # The plan's default: depth 6, pack 8, ff 0.1 on both backends and XGBoost,
    # then Numerai's example and deep recipes, 320 trees each (see above).
    BENCH_ARGS=${BENCH_ARGS:---feature-fraction 0.1 --rounds 6 --cpu-rounds 1 --host-round --recipes example deep --trees 320}
    log "benchmark: benchmarks/bench_gpu.py $BENCH_ARGS (limit ${BENCH_TIMEOUT:-none} s)"
    stage_begin bench
    set +e
    # shellcheck disable=SC2086
    timeout "${BENCH_TIMEOUT:-0}" python3 -P -c "$PYRUN" benchmarks/bench_gpu.py \
        --json "$OUT_DIR/bench_gpu.json" $BENCH_ARGS 2>&1 | tee "$OUT_DIR/bench_gpu.log"
    status=${PIPESTATUS[0]}
    set -e
    stage_end "(exit status $status)"
    if [ "$status" -eq 124 ]; then
        log "benchmark stopped after BENCH_TIMEOUT=$BENCH_TIMEOUT s: bench_gpu.json holds every fit done"
    elif [ "$status" -ne 0 ]; then
        log "benchmark FAILED (exit status $status)"; exit "$status"
    fi
fi
if has_stage dask; then
    # Dask strong scaling on the GPU machine's CPU cores (issue: 16 cores):
    # the local fit on w x t threads against w workers x t threads. dask and
    # distributed (pure Python and a few small binaries, ~5 MB) are carried in
    # .whl/dask/ (python3 -m pip download --only-binary=:all: --python-version 3.12
    # --implementation cp --platform manylinux_2_28_x86_64 -d .whl/dask distributed).
    stage_begin dask
    DASK_SITE=${DASK_SITE:-/tmp/dask-site}
    shopt -s nullglob
    dask_wheels=("${WHEEL_DIR:-$ROOT/.whl}"/dask/*.whl)
    shopt -u nullglob
    if [ ${#dask_wheels[@]} -gt 0 ] \
            && python3 -m pip install -q --no-index --no-deps --target "$DASK_SITE" "${dask_wheels[@]}"; then
        export PYTHONPATH="$PYTHONPATH:$DASK_SITE"
    fi
    DASK_ARGS=${DASK_ARGS:---sizes medium --rounds 10 --workers 1 2 8 --threads-per-worker 16 8 2 --repeats 1}
    log "Dask scaling: benchmarks/bench_dask.py $DASK_ARGS (limit ${DASK_TIMEOUT:-none} s)"
    set +e
    # shellcheck disable=SC2086
    timeout "${DASK_TIMEOUT:-0}" python3 -P -c "$PYRUN" benchmarks/bench_dask.py $DASK_ARGS \
        > "$OUT_DIR/bench_dask.json" 2> "$OUT_DIR/bench_dask.log"
    status=$?
    set -e
    stage_end "(exit status $status)"
    tail -3 "$OUT_DIR/bench_dask.log"
fi
if [ -n "${failed:-}" ]; then log "done, but the CUDA tests FAILED"; exit "$failed"; fi
log "done"
