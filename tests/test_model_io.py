"""Estimators to model files and back: identical predictions, safe loading."""

import numpy as np
import pytest

import packboost
from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.model_file import ModelFileError, read_model_file, write_model_file


def fitted_regressor(**params):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    era = np.repeat(np.arange(8), 100)
    y = np.nan_to_num(X[:, 0]) + rng.normal(size=800)
    return PackBoostRegressor(n_estimators=6, random_state=0, **params).fit(X, y, era=era), X


def test_round_trip_gives_identical_predictions(tmp_path):
    model, X = fitted_regressor()
    path = tmp_path / "model.pbm"
    model.save_model(path)
    loaded = packboost.load_model(path)
    assert isinstance(loaded, PackBoostRegressor)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params() == model.get_params()
    for name, values in model.ensemble_.nodes.items():
        np.testing.assert_array_equal(loaded.ensemble_.nodes[name], values)
    np.testing.assert_array_equal(loaded.ensemble_.layer_features, model.ensemble_.layer_features)
    assert loaded.n_eras_ == 8


def test_round_trip_keeps_feature_names_and_classes(tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
    labels = np.where(frame["a"] + rng.normal(size=300) > 0, "yes", "no")
    model = PackBoostClassifier(n_estimators=4, random_state=0).fit(frame, labels)
    model.save_model(tmp_path / "clf.pbm")
    loaded = packboost.load_model(tmp_path / "clf.pbm")
    assert isinstance(loaded, PackBoostClassifier)
    assert list(loaded.feature_names_in_) == ["a", "b", "c"]
    assert list(loaded.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(loaded.predict_proba(frame), model.predict_proba(frame))


def test_saving_an_unfitted_model_fails(tmp_path):
    with pytest.raises(ValueError, match="not fitted"):
        PackBoostRegressor().save_model(tmp_path / "x.pbm")
    assert not (tmp_path / "x.pbm").exists()


def forge(tmp_path, model, mutate):
    """Write a model file whose content was altered (valid checksum)."""
    model.save_model(tmp_path / "good.pbm")
    metadata, arrays = read_model_file(tmp_path / "good.pbm")
    mutate(metadata, arrays)
    write_model_file(tmp_path / "forged.pbm", metadata, arrays)
    return tmp_path / "forged.pbm"


def _backward_child(metadata, arrays):
    arrays["node_left_child"][0] = 0  # a cycle: the root is its own child


def _unknown_feature(metadata, arrays):
    arrays["node_feature"][0] = 99


def _unknown_estimator(metadata, arrays):
    metadata["estimator"] = "os.system"


def _missing_array(metadata, arrays):
    del arrays["node_value"]


def _wrong_dtype(metadata, arrays):
    arrays["node_feature"] = arrays["node_feature"].astype(np.int64)


def _not_a_model(metadata, arrays):
    metadata["kind"] = "something-else"


@pytest.mark.parametrize("mutate", [_backward_child, _unknown_feature, _unknown_estimator,
                                    _missing_array, _wrong_dtype, _not_a_model])
def test_forged_content_is_rejected(tmp_path, mutate):
    model, _ = fitted_regressor()
    with pytest.raises(ModelFileError):
        packboost.load_model(forge(tmp_path, model, mutate))


def test_corrupted_and_foreign_files_are_rejected(tmp_path):
    model, _ = fitted_regressor()
    path = tmp_path / "model.pbm"
    model.save_model(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    (tmp_path / "flipped.pbm").write_bytes(bytes(data))
    (tmp_path / "short.pbm").write_bytes(path.read_bytes()[:100])
    (tmp_path / "text.pbm").write_text("tree 1: x < 3")
    for name in ("flipped.pbm", "short.pbm", "text.pbm"):
        with pytest.raises(ModelFileError):
            packboost.load_model(tmp_path / name)


def test_files_without_round_layer_offsets_still_load(tmp_path):
    """Files written before round_layer_offsets existed: equal depths per round."""
    model, X = fitted_regressor()

    def drop_round_offsets(metadata, arrays):
        del arrays["round_layer_offsets"]
        del metadata["best_iteration"]

    loaded = packboost.load_model(forge(tmp_path, model, drop_round_offsets))
    assert loaded.ensemble_.round_layer_offsets is None
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.best_iteration_ is None and loaded.n_iter_ == 6
    head = loaded.ensemble_.truncate(2)
    np.testing.assert_array_equal(head.layer_offsets,
                                  model.ensemble_.truncate(2).layer_offsets)


def test_forged_round_layer_offsets_are_rejected(tmp_path):
    model, _ = fitted_regressor()

    def shift(metadata, arrays):
        arrays["round_layer_offsets"] = arrays["round_layer_offsets"] + 1

    with pytest.raises(ModelFileError, match="round_layer_offsets"):
        packboost.load_model(forge(tmp_path, model, shift))


# ----------------------------------------------------------------------------- run-time parameters


def test_a_file_never_chooses_threads_or_device(tmp_path, monkeypatch):
    """n_jobs=2**31-1 or device="cuda" in a (forged) file: the caller's settings run."""
    from packboost import backends
    from packboost._threads import resolve_n_threads

    model, X = fitted_regressor()

    def runtime_params(metadata, arrays):
        metadata["params"].update(n_jobs=2**31 - 1, device="cuda")

    path = forge(tmp_path, model, runtime_params)
    assert read_model_file(path)[0]["params"]["n_jobs"] == 2**31 - 1
    expected = model.predict(X)
    calls = []
    real_predict_raw = backends.predict_raw

    def recording(device, ensemble, X, n_threads, *args, **kwargs):
        calls.append((device, n_threads))
        return real_predict_raw(device, ensemble, X, n_threads, *args, **kwargs)

    monkeypatch.setattr(backends, "predict_raw", recording)
    loaded = packboost.load_model(path)
    assert (loaded.n_jobs, loaded.device) == (None, "cpu")
    np.testing.assert_array_equal(loaded.predict(X), expected)
    assert calls == [("cpu", resolve_n_threads(None))]
    one = packboost.load_model(path, n_jobs=1)
    np.testing.assert_array_equal(one.predict(X), expected)
    assert calls[-1] == ("cpu", 1) and one.n_jobs == 1


def test_run_time_parameters_are_not_saved_and_invalid_ones_in_a_file_are_ignored(tmp_path):
    model, X = fitted_regressor(n_jobs=2)
    model.save_model(tmp_path / "m.pbm")
    params = read_model_file(tmp_path / "m.pbm")[0]["params"]
    assert "n_jobs" not in params and "device" not in params
    assert params["n_estimators"] == 6 and params["random_state"] == 0  # the model's are kept

    def junk(metadata, arrays):
        metadata["params"].update(n_jobs="all of them", device="tpu")

    loaded = packboost.load_model(forge(tmp_path, model, junk))
    assert (loaded.n_jobs, loaded.device) == (None, "cpu")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_load_model_checks_its_run_time_arguments(tmp_path):
    model, _ = fitted_regressor()
    model.save_model(tmp_path / "m.pbm")
    with pytest.raises(ValueError, match="n_jobs"):
        packboost.load_model(tmp_path / "m.pbm", n_jobs=2**40)
    with pytest.raises(ValueError, match="device"):
        packboost.load_model(tmp_path / "m.pbm", device="tpu")


# ----------------------------------------------------------------------------- class labels


def _labels(kind, positive):
    """Two classes of labels of ``kind``, the second where ``positive``."""
    import datetime

    pairs = {
        "str": np.array(["no", "yes"]),
        "str wide": np.array(["ab", "\U0001f600z"]),
        "bytes": np.array([b"no", b"y\xffs"]),
        "object str": np.array(["no", "yes"], dtype=object),
        "object int": np.array([2, 10], dtype=object),
        "object big int": np.array([-(2**70), 2**70], dtype=object),
        "object bool": np.array([False, True], dtype=object),
        "object float": np.array([0.5, 2.0], dtype=object),
        "object bytes": np.array([b"a", b"b\x00c"], dtype=object),
        "bool": np.array([False, True]),
        "float16": np.array([-1.0, 3.0], dtype=np.float16),
        "float32": np.array([0.0, 1.0], dtype=np.float32),
        "float64": np.array([-2.0, 7.0]),
        "datetime64[D]": np.array(["2020-01-03", "2021-05-01"], dtype="datetime64[D]"),
        "datetime64[ns]": np.array([0, 10**18], dtype="datetime64[ns]"),
        "timedelta64[s]": np.array([1, 5], dtype="timedelta64[s]"),
        "big-endian int32": np.array([3, 4], dtype=">i4"),
        "date": np.array([datetime.date(2020, 1, 1), datetime.date(2021, 1, 1)], dtype=object),
    }
    for dtype in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]:
        info = np.iinfo(dtype)
        pairs[dtype] = np.array([info.min, info.max], dtype=dtype)
    classes = pairs[kind]
    y = np.empty(len(positive), dtype=classes.dtype)
    y[:] = classes[0]
    y[positive] = classes[1]
    return y


LABEL_KINDS = ["str", "str wide", "bytes", "object str", "object int", "object big int",
               "object bool", "object float", "object bytes", "bool", "float16", "float32",
               "float64", "datetime64[D]", "datetime64[ns]", "timedelta64[s]",
               "big-endian int32", "int8", "int16", "int32", "int64", "uint8", "uint16",
               "uint32", "uint64"]


def _classifier_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 3))
    return X, X[:, 0] + 0.3 * rng.normal(size=120) > 0


@pytest.mark.parametrize("kind", LABEL_KINDS)
def test_labels_round_trip_with_their_dtype_and_values(tmp_path, kind):
    X, positive = _classifier_data()
    y = _labels(kind, positive)
    model = PackBoostClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    model.save_model(tmp_path / "clf.pbm")
    loaded = packboost.load_model(tmp_path / "clf.pbm")
    assert loaded.classes_.dtype == model.classes_.dtype
    assert [type(label) for label in loaded.classes_] == [type(label) for label in model.classes_]
    assert loaded.classes_.tolist() == model.classes_.tolist()
    predicted, expected = loaded.predict(X), model.predict(X)
    assert predicted.dtype == expected.dtype and predicted.tolist() == expected.tolist()


@pytest.mark.parametrize("labels, named", [
    ("date", "datetime.date"),
    (np.array([1, 2.5], dtype=object), "float and int"),
    (np.array([1 + 1j, 2 + 0j]), "complex128"),
])
def test_labels_a_file_cannot_hold_are_refused_naming_their_type(tmp_path, labels, named):
    X, positive = _classifier_data()
    if isinstance(labels, str):
        y = _labels(labels, positive)
    else:
        y = np.empty(len(positive), dtype=labels.dtype)
        y[:] = labels[0]
        y[positive] = labels[1]
    model = PackBoostClassifier(n_estimators=1, max_depth=1, random_state=0)
    try:
        model.fit(X, y)
    except (TypeError, ValueError):
        pytest.skip(f"fit refuses these labels itself: {labels!r}")
    with pytest.raises(TypeError, match=f"cannot save a classifier whose labels are of "
                                        f"(type|dtype) {named}"):
        model.save_model(tmp_path / "clf.pbm")
    assert not (tmp_path / "clf.pbm").exists()


def _classifier_file(tmp_path, kind="str"):
    X, positive = _classifier_data()
    model = PackBoostClassifier(n_estimators=1, max_depth=1, random_state=0)
    return model.fit(X, _labels(kind, positive))


@pytest.mark.parametrize("kind, change, pattern", [
    ("str", {"classes_dtype": "V8"}, "unsupported classes_dtype"),
    ("str", {"classes_dtype": "<U999999"}, "unsupported classes_dtype|do not fit"),
    ("str", {"classes_dtype": "<U2"}, "do not fit in <U2"),
    ("str", {"classes_dtype": "|O", "classes_type": "module"}, "unsupported classes_type"),
    ("str", {"classes_dtype": "|O", "classes_type": "int"}, "must be int labels"),
    ("str", {"classes": ["a", "a"]}, "at least 2 distinct classes"),
    ("str", {"classes": ["a"]}, "at least 2 distinct classes"),
    ("bytes", {"classes": ["\u4e00", "b"]}, "Latin-1"),
    ("object int", {"classes": [1, True]}, "must be int labels"),
    ("float16", {"arrays": np.array([0.1, 1.0], dtype=np.float32)}, "do not fit in float16"),
    ("float16", {"classes_dtype": "<i8"}, "cannot be int64"),
    ("datetime64[D]", {"arrays": np.array([0.0, 1.0])}, "must be stored as int64"),
    ("datetime64[D]", {"arrays": np.array([np.iinfo(np.int64).min, 0])}, "NaT"),
])
def test_forged_labels_are_refused(tmp_path, kind, change, pattern):
    def mutate(metadata, arrays):
        for key, value in change.items():
            if key == "arrays":
                arrays["classes"] = value
            else:
                metadata[key] = value

    with pytest.raises(ModelFileError, match=pattern):
        packboost.load_model(forge(tmp_path, _classifier_file(tmp_path, kind), mutate))


@pytest.mark.parametrize("name, value", [("monotone_constraints", [2]),
                                         ("monotone_constraints", {"a": "up"}),
                                         ("interaction_constraints", [[]]),
                                         ("interaction_constraints", "all")])
def test_forged_constraints_are_rejected(tmp_path, name, value):
    model, _ = fitted_regressor()

    def replace(metadata, arrays):
        metadata["params"][name] = value

    with pytest.raises(ModelFileError, match=f"invalid parameter in model file: {name}"):
        packboost.load_model(forge(tmp_path, model, replace))
