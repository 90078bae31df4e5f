"""Model files over time and from strangers.

* Files of every format version this PackBoost has written keep loading and
  predicting what they predicted when written: ``tests/data/model_v{N}_*``
  are committed once per version (``tests/data/make_model_fixtures.py``) and
  never rewritten, so a format bump that forgets an old reader fails here.
* Loading never executes code: no pickle, no eval, no import of a name taken
  from the file; forged but well-checksummed content is refused with
  :class:`~packboost.model_file.ModelFileError` before a kernel sees it.
"""

from __future__ import annotations

import builtins
import importlib
import json
import pathlib
import pickle
import struct

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.model_file import FORMAT_VERSION, ModelFileError, read_model_file, write_model_file

DATA = pathlib.Path(__file__).parent / "data"
VERSIONS = sorted(int(path.name.split("_")[1][1:]) for path in DATA.glob("model_v*_expected.json"))


def test_there_is_a_fixture_for_every_format_version():
    assert VERSIONS == list(range(1, FORMAT_VERSION + 1)), (
        "write the fixtures of the new format version: python tests/data/make_model_fixtures.py")


@pytest.mark.parametrize("version", VERSIONS)
def test_files_of_every_format_version_load_and_predict_as_written(version):
    expected = json.loads((DATA / f"model_v{version}_expected.json").read_text())
    X = np.asarray(expected["X"], dtype=np.float64)
    for kind in ("regressor", "classifier"):
        path = DATA / f"model_v{version}_{kind}.pbm"
        assert struct.unpack_from("<I", path.read_bytes(), 8)[0] == version
        model = packboost.load_model(path)
        if kind == "regressor":
            assert isinstance(model, PackBoostRegressor)
            np.testing.assert_array_equal(model.predict(X), expected["regressor_predict"])
        else:
            pd = pytest.importorskip("pandas")
            assert isinstance(model, PackBoostClassifier)
            assert list(model.classes_) == expected["classifier_classes"]
            assert list(model.feature_names_in_) == expected["feature_names"]
            frame = pd.DataFrame(X, columns=expected["feature_names"])
            # Raw scores are sums in a fixed order: exact. Probabilities go through
            # np.exp, whose last bit may differ between NumPy builds.
            np.testing.assert_array_equal(model.decision_function(frame),
                                          expected["classifier_decision_function"])
            np.testing.assert_allclose(model.predict_proba(frame),
                                       expected["classifier_predict_proba"], rtol=1e-12)


@pytest.mark.parametrize("version", VERSIONS)
def test_old_files_can_be_trained_further_and_saved_in_the_newest_version(version, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    old = packboost.load_model(DATA / f"model_v{version}_regressor.pbm")
    more = PackBoostRegressor(n_estimators=2, pack_size=old.pack_size, random_state=0)
    more.fit(X, X[:, 0] + rng.normal(size=200), init_model=old)
    assert more.n_iter_ == old.n_iter_ + 2
    more.save_model(tmp_path / "new.pbm")
    assert struct.unpack_from("<I", (tmp_path / "new.pbm").read_bytes(), 8)[0] == FORMAT_VERSION
    np.testing.assert_array_equal(packboost.load_model(tmp_path / "new.pbm").predict(X),
                                  more.predict(X))


def test_parameters_newer_than_a_file_load_as_it_was_trained(tmp_path):
    """A file written before era_std existed was grown with the total std."""
    assert packboost.load_model(DATA / "model_v1_regressor.pbm").era_std == "total"
    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 3))
    model = PackBoostRegressor(n_estimators=1, random_state=0).fit(X, X[:, 0])
    assert model.era_std == "between"
    model.save_model(tmp_path / "m.pbm")
    assert packboost.load_model(tmp_path / "m.pbm").era_std == "between"


def test_loading_executes_no_code(monkeypatch):
    """No unpickling, eval/exec or import while a model file is read and built."""
    path = DATA / f"model_v{FORMAT_VERSION}_classifier.pbm"
    packboost.load_model(path)  # modules a first load imports are imported now

    def forbidden(*args, **kwargs):
        raise AssertionError("code execution while loading a model file")

    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    monkeypatch.setattr(np, "load", forbidden)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(builtins, "compile", forbidden)
    monkeypatch.setattr(importlib, "import_module", forbidden)
    real_import = builtins.__import__
    imported = []

    def watching_import(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", watching_import)
    model = packboost.load_model(path)
    monkeypatch.undo()
    assert all(name.startswith(("packboost", "numpy", "os")) for name in imported), imported
    assert isinstance(model, PackBoostClassifier)


def _forge(tmp_path, mutate, kind="regressor", version=FORMAT_VERSION):
    metadata, arrays = read_model_file(DATA / f"model_v{version}_{kind}.pbm")
    mutate(metadata, arrays)
    path = tmp_path / "forged.pbm"
    write_model_file(path, metadata, arrays)
    return path


def _set(*keys, value):
    def mutate(metadata, arrays):
        target = metadata
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return mutate


def _array(name, change):
    def mutate(metadata, arrays):
        arrays[name] = change(arrays[name].copy())
    return mutate


def _delete(name):
    def mutate(metadata, arrays):
        del (arrays if name in arrays else metadata)[name]
    return mutate


def _assign(array, index, value):
    array[index] = value
    return array


FORGED = [
    ("estimator names a function", _set("estimator", value="os.system"), r"unknown estimator"),
    ("estimator not a string", _set("estimator", value=["PackBoostRegressor"]),
     r"\['estimator'\] has the wrong type"),
    ("params not an object", _set("params", value=[1, 2]), r"\['params'\] has the wrong type"),
    ("max_depth", _set("params", "max_depth", value="deep"),
     r"invalid parameter in model file: max_depth must be an int, got 'deep'"),
    ("random_state", _set("params", "random_state", value=-5),
     r"random_state must be None or a non-negative int, got -5"),
    ("pack_size", _set("pack_size", value=1000), r"pack_size=1000 is out of range"),
    ("pack_size bool", _set("pack_size", value=True), r"\['pack_size'\] has the wrong type"),
    ("n_features_in", _set("n_features_in", value=0), r"n_features_in=0 is out of range"),
    ("n_eras", _set("n_eras", value="many"), r"\['n_eras'\] has the wrong type"),
    ("base_score inf", _set("base_score", value=float("inf")), r"base_score must be finite"),
    ("base_score text", _set("base_score", value="0.1"), r"\['base_score'\] has the wrong type"),
    ("feature names", _set("feature_names", value=["a", 1, "c", "d"]),
     r"feature_names must be 4 strings"),
    ("best_iteration", _set("best_iteration", value=99), r"best_iteration 99 is not a round"),
    ("bin_mapper", _set("bin_mapper", value=None), r"\['bin_mapper'\] has the wrong type"),
    ("no kind", _delete("kind"), r"a PackBoost container but not a model"),
    ("no value array", _delete("node_value"), r"lacks the array 'node_value'"),
    ("no tree offsets", _delete("tree_offsets"), r"lacks the array 'tree_offsets'"),
    ("cycle", _array("node_left_child", lambda a: _assign(a, 0, 0)),
     r"a child index points outside its tree or backwards"),
    ("child in another tree", _array("node_right_child", lambda a: _assign(a, 0, len(a) - 1)),
     r"a child index points outside its tree"),
    ("feature out of range", _array("node_feature", lambda a: _assign(a, 0, 4)),
     r"a split refers to a feature that does not exist"),
    ("NaN leaf", _array("node_value", lambda a: _assign(a, -1, np.nan)),
     r"leaf values must be finite"),
    ("NaN threshold", _array("node_threshold", lambda a: _assign(a, 0, np.nan)),
     r"split thresholds must not be NaN"),
    ("tree offsets", _array("tree_offsets", lambda a: a[::-1].copy()),
     r"tree_offsets do not partition the nodes"),
    ("tree offsets wrap around", _array("tree_offsets", lambda a: _assign(a, 2, -2**63)),
     r"tree_offsets do not partition the nodes"),  # np.diff wraps; np.repeat then crashed
    ("layer offsets wrap around", _array("layer_offsets", lambda a: _assign(a, 2, -2**63)),
     r"layer_offsets do not partition layer_features"),
    ("tree offsets 2-D", _array("tree_offsets", lambda a: a[:, None]),
     r"tree_offsets must be a 1-D int64 array, got 2-D"),
    ("layer feature", _array("layer_features", lambda a: _assign(a, 0, 77)),
     r"layer_features name a feature that does not exist"),
    ("layer offsets", _array("layer_offsets", lambda a: a + 1),
     r"layer_offsets do not partition layer_features"),
    ("round layer offsets", _array("round_layer_offsets", lambda a: a * 2),
     r"round_layer_offsets do not match"),
    ("cuts not increasing", _array("bin_cuts", lambda a: a[::-1].copy()),
     r"bin_cuts of feature 0 are not strictly increasing"),
    ("n_bins", _array("bin_n_bins", lambda a: a - 1),
     r"invalid bin mapper: bin_cut_offsets do not match"),
    ("too many bins", _array("bin_n_bins", lambda a: a + 1),
     r"invalid bin mapper: bin_n_bins must lie in \[1, max_bins=255\]"),
    ("dtype", _array("node_feature", lambda a: a.astype(np.float64)),
     r"node_feature must be a 1-D int32 array"),
]


@pytest.mark.parametrize("mutate, pattern", [case[1:] for case in FORGED],
                         ids=[case[0] for case in FORGED])
def test_forged_content_is_refused_with_a_clear_error(tmp_path, mutate, pattern):
    path = _forge(tmp_path, mutate)
    with pytest.raises(ModelFileError, match=pattern) as info:
        packboost.load_model(path)
    assert "forged.pbm" in str(info.value)


@pytest.mark.parametrize("n_jobs, device", [(0, "cuda"), (2**40, "tpu"), (2**31 - 1, None)])
def test_run_time_parameters_of_a_file_are_not_taken(tmp_path, n_jobs, device):
    """A file holds a model, not the threads or device to run it with (model_io)."""
    path = _forge(tmp_path, lambda metadata, arrays: metadata["params"].update(
        n_jobs=n_jobs, device=device))
    model = packboost.load_model(path)
    assert (model.n_jobs, model.device) == (None, "cpu")
    assert packboost.load_model(path, n_jobs=1).n_jobs == 1


@pytest.mark.parametrize("mutate, pattern", [
    (_set("classes", value=["up", "up"]), r"exactly 2 distinct classes"),
    (_set("classes", value=["a", "b", "c"]), r"exactly 2 distinct classes"),
    (_set("classes", value=[1, 2]), r"classes must be strings or a numeric array"),
    (_delete("classes"), r"lacks 'classes'"),
], ids=["same class twice", "three classes", "numbers as metadata", "no classes"])
def test_forged_classes_are_refused(tmp_path, mutate, pattern):
    with pytest.raises(ModelFileError, match=pattern):
        # the version-1 file: its classes predate classes_dtype (the legacy reader)
        packboost.load_model(_forge(tmp_path, mutate, kind="classifier", version=1))


@pytest.mark.parametrize("version", [version for version in VERSIONS if version >= 2])
def test_categorical_models_of_every_format_version_load_and_predict_as_written(version):
    expected = json.loads((DATA / f"model_v{version}_expected.json").read_text())
    X = np.array([[np.nan if value is None else value for value in row]
                  for row in expected["categorical_X"]], dtype=np.float64)
    model = packboost.load_model(DATA / f"model_v{version}_categorical.pbm")
    assert np.any(model.ensemble_.nodes["threshold_bin"] == -1)
    np.testing.assert_array_equal(model.predict(X), expected["categorical_predict"])
