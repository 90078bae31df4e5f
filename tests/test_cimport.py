"""``cimport packboost`` from a downstream package, built against the installed packboost.

A tiny meson-python project is written to a temporary directory, compiled
with Cython's include path from ``packboost.get_include()`` and installed
into a private ``--target`` directory; its nogil predictions must equal
``model.predict`` bit for bit (one kernel, packboost/tree.pxd, serves both).
Only this test notices a ``.pxd`` missing from a wheel or an sdist (a known
pitfall), so ci/check_wheel.sh runs it against the repaired wheel.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest

import packboost
from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like

PYPROJECT = """\
[build-system]
build-backend = "mesonpy"
requires = ["meson-python>=0.16", "Cython>=3.0.10"]

[project]
name = "pb-downstream"
version = "0.0.1"
"""

MESON_BUILD = """\
project('pb_downstream', 'c', 'cython', meson_version: '>=1.1')
py = import('python').find_installation(pure: false)
# The installed packboost says where its .pxd files are (README "Use from Cython").
packboost_include = run_command(
  py, '-c', 'import packboost; print(packboost.get_include())', check: true,
).stdout().strip()
foreach name : MODULES
  py.extension_module(
    name, name + '.pyx',
    cython_args: ['-I', packboost_include],
    install: true,
  )
endforeach
"""

# The user guide's "Use from Cython" page (absent where only tests/ was copied).
README = Path(__file__).resolve().parents[1] / "docs" / "guide" / "cython.md"

DOWNSTREAM_PYX = '''\
# cython: language_level=3, boundscheck=False, wraparound=False
"""Downstream code evaluating packboost trees on its own arrays, without the GIL."""

import numpy as np

cimport packboost
from libc.stdint cimport int64_t, uint8_t, uint32_t


cdef packboost.TreeNodes tree_nodes(nodes: dict):
    cdef const packboost.feature_index_t[::1] feature = nodes["feature"]
    cdef const double[::1] threshold = nodes["threshold"]
    cdef const uint8_t[::1] missing_left = nodes["missing_left"]
    cdef const packboost.node_index_t[::1] left_child = nodes["left_child"]
    cdef const packboost.node_index_t[::1] right_child = nodes["right_child"]
    cdef const double[::1] value = nodes["value"]
    cdef packboost.TreeNodes view
    view.feature = &feature[0]
    view.threshold = &threshold[0]
    view.threshold_bin = NULL
    view.missing_left = &missing_left[0]
    view.left_child = &left_child[0]
    view.right_child = &right_child[0]
    view.value = &value[0]
    return view  # the pointers stay valid while the caller holds ``nodes``


def predict(const packboost.raw_value_t[:, ::1] X, dict nodes,
            const int64_t[::1] tree_roots, double base_score):
    """base_score + the trees, rows of X (C order, any of packboost's raw dtypes)."""
    cdef packboost.TreeNodes view = tree_nodes(nodes)
    out_array = np.full(X.shape[0], base_score)
    cdef double[::1] out = out_array
    with nogil:
        packboost.predict_rows_raw(&view, &tree_roots[0], tree_roots.shape[0],
                                   &X[0, 0], X.shape[0], X.shape[1], 1, &out[0])
    return out_array


def predict_binned(const packboost.bin_code_t[:, ::1] X_binned, dict nodes,
                   const int64_t[::1] tree_roots, double base_score,
                   const packboost.bin_index_t[::1] missing_bin):
    """The same from feature-major bin codes (n_features, n_rows)."""
    cdef packboost.TreeNodes view = tree_nodes(nodes)
    cdef const packboost.bin_index_t[::1] threshold_bin = nodes["threshold_bin"]
    view.threshold_bin = &threshold_bin[0]
    out_array = np.full(X_binned.shape[1], base_score)
    cdef double[::1] out = out_array
    with nogil:
        packboost.predict_rows_binned(&view, &tree_roots[0], tree_roots.shape[0],
                                      &X_binned[0, 0], X_binned.shape[1], 1,
                                      X_binned.shape[1], &missing_bin[0], &out[0])
    return out_array


def predict_with_sets(const double[:, ::1] X, dict nodes, const int64_t[::1] tree_roots,
                      double base_score):
    """predict for a model with categorical features (category codes in X)."""
    cdef packboost.TreeNodes view = tree_nodes(nodes)
    cdef const packboost.bin_index_t[::1] threshold_bin = nodes["threshold_bin"]
    cdef const uint32_t[:, ::1] words = nodes["category_words"]
    cdef packboost.CategorySets sets
    view.threshold_bin = &threshold_bin[0]
    sets.words = &words[0, 0]
    sets.n_words = words.shape[1]
    out_array = np.full(X.shape[0], base_score)
    cdef double[::1] out = out_array
    with nogil:
        packboost.predict_rows_raw_with_sets(&view, &sets, &tree_roots[0],
                                             tree_roots.shape[0], &X[0, 0], X.shape[0],
                                             X.shape[1], 1, &out[0])
    return out_array


def apply(const double[:, ::1] X, dict nodes, const int64_t[::1] tree_roots):
    """Leaf index reached by every (row, tree)."""
    cdef packboost.TreeNodes view = tree_nodes(nodes)
    leaves_array = np.empty((X.shape[0], tree_roots.shape[0]), dtype=np.int32)
    cdef packboost.node_index_t[:, ::1] leaves = leaves_array
    cdef Py_ssize_t row, tree
    with nogil:
        for row in range(X.shape[0]):
            for tree in range(tree_roots.shape[0]):
                leaves[row, tree] = packboost.leaf_of_raw_row(
                    &view, <packboost.node_index_t>tree_roots[tree], &X[row, 0], 1)
    return leaves_array
'''


def _have_c_compiler() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return any(shutil.which(name) for name in (compiler, "cc", "gcc", "clang"))


@pytest.fixture(scope="module")
def downstream(tmp_path_factory):
    """Build and import the downstream package (once per session: it compiles)."""
    if not _have_c_compiler():
        pytest.skip("no C compiler found: cannot build a downstream Cython package")
    root = tmp_path_factory.mktemp("cimport")
    source = root / "pb_downstream"
    source.mkdir()
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "pb_downstream.pyx").write_text(DOWNSTREAM_PYX)
    modules = ["pb_downstream"]
    # The guide's "Use from Cython" compiles as written (when the page is at hand).
    readme_blocks = (re.findall(r"```cython\n(.*?)```", README.read_text(), re.S)
                     if README.is_file() else [])
    if readme_blocks:
        (source / "mymodule.pyx").write_text(readme_blocks[0])
        modules.append("mymodule")
    (source / "meson.build").write_text(
        MESON_BUILD.replace("MODULES", "[" + ", ".join(f"'{m}'" for m in modules) + "]"))
    target = root / "site"
    # No build isolation: the build must see the packboost under test, not one
    # pip would fetch; the build tools come with the [test] extra.
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
               "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
               "--target", str(target), f"-Cbuild-dir={root / 'build'}", str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.fail("building the downstream package failed:\n"
                    + textwrap.indent(result.stdout + result.stderr, "    "))
    sys.path.insert(0, str(target))
    try:
        return {name: importlib.import_module(name) for name in modules}
    finally:
        sys.path.remove(str(target))


@pytest.fixture(scope="module")
def model_and_data():
    data = make_numerai_like(n_rows=3000, n_features=8, n_eras=12, random_state=3)
    X = data.X.astype(np.float64)
    rng = np.random.default_rng(0)
    X[rng.random(X.shape) < 0.05] = np.nan  # exercise the missing side
    model = PackBoostRegressor(n_estimators=6, pack_size=3, max_depth=4, random_state=0)
    model.fit(X, data.y, era=data.era)
    return model, X


def test_public_pxd_files_are_installed():
    include = Path(packboost.get_include())
    for name in ("__init__.pxd", "tree.pxd"):
        assert (include / "packboost" / name).is_file(), f"{name} missing under {include}"


@pytest.fixture(scope="module")
def downstream_module(downstream):
    return downstream["pb_downstream"]


def test_downstream_predict_equals_model_predict(downstream_module, model_and_data):
    model, X = model_and_data
    ensemble = model.ensemble_
    expected = model.predict(X)
    got = downstream_module.predict(np.ascontiguousarray(X), ensemble.nodes,
                                    ensemble.tree_roots(), ensemble.base_score)
    np.testing.assert_array_equal(got, expected)


def test_downstream_fused_input_types(downstream_module, model_and_data):
    model, X = model_and_data
    ensemble = model.ensemble_
    codes = np.nan_to_num(X, nan=0.0).astype(np.uint8)  # integer features, as Numerai ships
    for dtype in (np.uint8, np.int8, np.int32, np.float32):
        X_typed = np.ascontiguousarray(codes, dtype=dtype)
        got = downstream_module.predict(X_typed, ensemble.nodes, ensemble.tree_roots(),
                                        ensemble.base_score)
        np.testing.assert_array_equal(got, model.predict(X_typed))


def test_downstream_binned_equals_model_predict(downstream_module, model_and_data):
    model, X = model_and_data
    ensemble = model.ensemble_
    X_binned = model.bin_mapper_.transform(X)          # (n_features, n_rows), the fit's bins
    missing_bin = np.ascontiguousarray(model.bin_mapper_.n_bins_, dtype=np.int32)
    got = downstream_module.predict_binned(X_binned, ensemble.nodes, ensemble.tree_roots(),
                                           ensemble.base_score, missing_bin)
    np.testing.assert_array_equal(got, model.predict(X))


def test_downstream_leaf_walk(downstream_module, model_and_data):
    model, X = model_and_data
    ensemble = model.ensemble_
    leaves = downstream_module.apply(np.ascontiguousarray(X), ensemble.nodes,
                                     ensemble.tree_roots())
    assert (ensemble.nodes["feature"][leaves] == -1).all()
    summed = ensemble.base_score + ensemble.nodes["value"][leaves].sum(axis=1)
    np.testing.assert_allclose(summed, model.predict(X), rtol=0, atol=1e-12)


def test_readme_cython_example(downstream, model_and_data):
    if "mymodule" not in downstream:
        pytest.skip(f"{README} not found: the guide's example was not compiled")
    model, X = model_and_data
    ensemble = model.ensemble_
    got = downstream["mymodule"].predict(np.ascontiguousarray(X), ensemble.nodes,
                                         ensemble.tree_roots(), ensemble.base_score)
    np.testing.assert_array_equal(got, model.predict(X))


def test_downstream_predict_with_category_sets(downstream_module):
    rng = np.random.default_rng(1)
    n_rows, n_eras = 3000, 10
    codes = rng.integers(0, 40, n_rows).astype(np.float64)
    codes[rng.random(n_rows) < 0.05] = np.nan
    x = rng.normal(size=n_rows)
    y = np.where(np.isin(codes, [1, 5, 9, 33, 38]), 1.0, -0.3) + 0.2 * x + rng.normal(size=n_rows)
    X = np.column_stack([codes, x])
    model = PackBoostRegressor(n_estimators=6, pack_size=3, max_depth=4, random_state=0,
                               categorical_features=[0], min_data_per_group=20)
    model.fit(X, y, era=np.repeat(np.arange(n_eras), n_rows // n_eras))
    ensemble = model.ensemble_
    assert np.any(ensemble.nodes["threshold_bin"] == -1)
    X_codes = np.ascontiguousarray(model.category_encoder_.transform(X))
    got = downstream_module.predict_with_sets(X_codes, ensemble.nodes, ensemble.tree_roots(),
                                              ensemble.base_score)
    np.testing.assert_array_equal(got, model.predict(X))
