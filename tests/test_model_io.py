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
