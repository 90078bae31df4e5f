"""What a build says about itself: version (one source), show_config, get_include, variants."""

from __future__ import annotations

import importlib.util
import os
import re
import runpy
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import packboost
from packboost._config import DISTRIBUTIONS, installed_distributions

ROOT = Path(__file__).resolve().parents[1]
# PEP 440 public versions (no local part: PyPI refuses those).
PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def test_version_is_pep440_and_matches_the_metadata():
    assert PEP440.match(packboost.__version__), packboost.__version__
    installed = installed_distributions()
    if not installed:
        pytest.skip("packboost is not installed (running the source tree)")
    for name in installed:
        assert metadata.version(name) == packboost.__version__


def test_version_has_one_source():
    version_file = ROOT / "src" / "packboost" / "_version.py"
    meson_build = ROOT / "meson.build"
    if not (version_file.is_file() and meson_build.is_file()):
        pytest.skip("source tree not at hand (testing an installed wheel)")
    assert runpy.run_path(str(version_file))["__version__"] == packboost.__version__
    # meson.build's project(version: ...) runs packboost/_version.py, no literal.
    text = meson_build.read_text()
    assert re.search(r"version: run_command\([^\n]*files\('src/packboost/_version\.py'\)", text)
    assert not re.search(r"^\s*version:\s*'\d", text, re.M)


def test_show_config_reports_the_build(capsys):
    config = packboost.show_config()
    out = capsys.readouterr().out
    for key in ("version", "distribution", "python", "numpy", "compiler", "arch", "buildtype",
                "openmp", "omp_max_threads", "available_cpus", "cuda", "cuda_build",
                "cuda_device"):
        assert key in config
        assert f"{key}: " in out
    assert config["version"] == packboost.__version__
    assert config["openmp"] is packboost.openmp_enabled()
    assert config["compiler"] != "unknown"      # the generated _build_config.py is there
    assert config["arch"].split("-")[0] in ("x86_64", "aarch64", "ppc64", "s390x", "arm")
    assert config["omp_max_threads"] >= 1 and config["available_cpus"] >= 1
    assert isinstance(config["cuda"], bool)
    if config["cuda"]:
        assert config["cuda_build"]["built"] and isinstance(config["cuda_device"], bool)
    else:
        assert config["cuda_build"] is None and config["cuda_device"] is None


def test_show_config_says_built_not_true_when_no_gpu_is_found(capsys, monkeypatch):
    """A CUDA build on a machine without a GPU printed ``cuda: True``: it now says "built"."""
    from packboost import _config

    monkeypatch.setattr(_config, "_cuda_config", lambda: ({"built": True, "arch": "9.0"}, False))
    config = packboost.show_config()
    out = capsys.readouterr().out
    assert config["cuda"] is True and config["cuda_device"] is False
    assert "cuda: built\n" in out and "cuda_device: none found" in out
    assert "cuda: True" not in out
    monkeypatch.setattr(_config, "_cuda_config", lambda: (None, None))
    packboost.show_config()
    out = capsys.readouterr().out
    assert "cuda: not built\n" in out and "cuda_device: none (CUDA not built)" in out


def test_show_config_agrees_with_the_cuda_backend():
    device = pytest.importorskip("packboost._device")
    assert packboost.show_config()["cuda"] is device.cuda_built()


def test_one_distribution_installed():
    installed = installed_distributions()
    assert set(installed) <= set(DISTRIBUTIONS)
    assert len(installed) <= 1, f"{installed} all install packboost: they overwrite each other"


def test_get_include_holds_the_public_pxd_files():
    include = Path(packboost.get_include())
    assert (include / "packboost" / "__init__.pxd").is_file()
    text = (include / "packboost" / "__init__.pxd").read_text()
    for name in ("TreeNodes", "predict_rows_raw", "predict_rows_binned", "leaf_of_raw_row",
                 "leaf_of_binned_row", "raw_value_t", "bin_code_t"):
        assert name in text
        assert re.search(rf"\b{name}\b", (include / "packboost" / "tree.pxd").read_text())


def test_variant_script_renames_the_distribution(tmp_path):
    script = ROOT / "ci" / "variant.py"
    if not script.is_file():
        pytest.skip("ci/variant.py not at hand (testing an installed wheel)")
    variant = runpy.run_path(str(script))
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    assert variant["apply_variant"](tmp_path, "cu13") == "packboost-cu13"
    text = (tmp_path / "pyproject.toml").read_text()
    assert re.search(r'^name = "packboost-cu13"$', text, re.M)
    assert '[tool.meson-python.args]\nsetup = ["-Dcuda=enabled"]' in text
    with pytest.raises(SystemExit, match="already has"):
        variant["apply_variant"](tmp_path, "cu13")


def test_test_oracles_are_not_installed():
    """The oracles live under tests/ (oracles/, cuda_stub/), never in the package or wheel."""
    test_only = ("_reference", "_cuda_emulate", "fake_cuda")
    for module in ("packboost._reference", "packboost._cuda_emulate"):
        assert importlib.util.find_spec(module) is None, f"{module} is importable"
    package = Path(packboost.__file__).resolve().parent
    shipped = [path.relative_to(package).as_posix() for path in package.rglob("*")
               if "__pycache__" not in path.parts]
    for name in installed_distributions():
        shipped += [file.as_posix() for file in metadata.files(name) or ()]
    leaked = [path for path in shipped if any(stem in path for stem in test_only)]
    assert not leaked, f"test-only files installed: {leaked}"
    # What tests/oracles/_cuda_emulate.pyx compiles against is installed instead.
    include = package / "include"
    if (include / "des.h").is_file():  # an installed packboost (editable: csrc/)
        for header in ("des.h", "split_params.h", "pbc_split.h"):
            assert (include / header).is_file(), f"{header} missing from {include}"


def _python(code: str, tmp_path) -> subprocess.CompletedProcess:
    """``python -c code`` in a scratch directory (no source tree to shadow the install)."""
    env = dict(os.environ)
    package_parent = str(Path(packboost.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_packboost_is_light(tmp_path):
    """scikit-learn (about a second), pandas and matplotlib load only when used."""
    result = _python(
        "import sys, packboost\n"
        "heavy = [m for m in ('sklearn', 'pandas', 'matplotlib') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "packboost.load_model, packboost.show_config, packboost.cuda_available\n"
        "assert 'sklearn' not in sys.modules\n"
        "print('light')\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "light"


def test_public_submodules_and_plots_are_reachable_from_import_packboost(tmp_path):
    """``packboost.datasets`` and ``packboost.plot_importance`` raised AttributeError
    after ``import packboost`` alone; they load on first access, matplotlib only
    when a plot is drawn."""
    result = _python(
        "import sys, packboost\n"
        "data = packboost.datasets.make_sign_flip(n_rows=200, n_features=4, n_eras=4,\n"
        "                                         random_state=0)\n"
        "assert 'sklearn' not in sys.modules\n"
        "assert callable(packboost.plot_importance) and callable(packboost.plot_metric)\n"
        "assert packboost.plot_importance is packboost.plotting.plot_importance\n"
        "assert callable(packboost.metrics.era_report)\n"
        "assert callable(packboost.model_selection.EraKFold)\n"
        "assert 'matplotlib' not in sys.modules\n"
        "assert {'datasets', 'plot_importance', 'dask'} <= set(dir(packboost))\n"
        "try:\n"
        "    packboost.not_a_module\n"
        "except AttributeError as error:\n"
        "    assert 'not_a_module' in str(error)\n"
        "print('reached')\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "reached"


def test_the_estimators_load_on_first_access_and_are_sklearn_estimators(tmp_path):
    pytest.importorskip("sklearn")
    result = _python(
        "import sys, numpy as np, packboost\n"
        "from packboost import PackBoostRegressor\n"
        "from sklearn.base import BaseEstimator, clone\n"
        "from sklearn.model_selection import GridSearchCV\n"
        "assert isinstance(PackBoostRegressor(), BaseEstimator)\n"
        "assert packboost.PackBoostClassifier.__module__ == 'packboost.sklearn'\n"
        "assert 'PackBoostRegressor' in dir(packboost)\n"
        "assert clone(PackBoostRegressor(max_depth=2)).max_depth == 2\n"
        "X = np.random.default_rng(0).normal(size=(300, 3)); y = X[:, 0] + X[:, 1]\n"
        "search = GridSearchCV(PackBoostRegressor(n_estimators=2, n_jobs=1),\n"
        "                      {'max_depth': [1, 2]}, cv=2).fit(X, y)\n"
        "print(search.best_params_['max_depth'])\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() in ("1", "2")


def test_load_model_needs_no_estimator_import_first(tmp_path):
    """A model file loads in a fresh process that never named an estimator."""
    from packboost import PackBoostRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] + rng.normal(size=200)
    PackBoostRegressor(n_estimators=2, n_jobs=1).fit(X, y).save_model(tmp_path / "m.pbm")
    result = _python("import packboost\n"
                     "print(type(packboost.load_model('m.pbm')).__name__)\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "PackBoostRegressor"


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'PackBoostRanker'"):
        packboost.PackBoostRanker  # noqa: B018


def test_no_negative_subscripts_where_wraparound_is_off():
    """meson.build compiles every module with `wraparound=False`: a literal
    negative index (`a[-1]`) then reaches the object unadjusted, and NumPy
    2.5 raises IndexError for it where 2.4 did not (every CPU fit failed on
    the GPU machine's NumPy 2.5.2). Index from the length instead."""
    sources = sorted((ROOT / "src" / "packboost").glob("*.p[yx][xd]"))
    if not sources:
        pytest.skip("source tree not at hand (testing an installed wheel)")
    # A subscript item that starts with a minus sign: a[-1], a[i, -1], a[:-2].
    negative = re.compile(r"\[(?:[^\][()]*[,:])?\s*-\s*\d")
    found = []
    for path in sources:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if negative.search(code):
                found.append(f"{path.name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
