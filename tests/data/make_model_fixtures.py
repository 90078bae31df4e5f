"""Write the committed model-file fixtures of the current format version.

Run once per *new* format version, from the repository root::

    python tests/data/make_model_fixtures.py

It writes ``model_v{N}_regressor.pbm``, ``model_v{N}_classifier.pbm`` and
``model_v{N}_expected.json`` (rows to predict and the predictions the models
gave when written) for the current ``FORMAT_VERSION`` N, and refuses to
overwrite existing ones: the files of earlier versions are the record that
old models keep loading (tests/test_model_compat.py), so they never change.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

from packboost import PackBoostClassifier, PackBoostRegressor
from packboost.model_file import FORMAT_VERSION

HERE = pathlib.Path(__file__).resolve().parent


def main() -> int:
    prefix = HERE / f"model_v{FORMAT_VERSION}"
    paths = [pathlib.Path(f"{prefix}_{name}") for name in
             ("regressor.pbm", "classifier.pbm", "expected.json")]
    existing = [path.name for path in paths if path.exists()]
    if existing:
        print(f"refusing to overwrite {existing}: fixtures of a format version never change",
              file=sys.stderr)
        return 1
    rng = np.random.default_rng(20261122)
    n_rows, n_features = 400, 4
    X = rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < 0.1] = np.nan
    era = np.repeat(np.arange(8), n_rows // 8)
    signal = np.nan_to_num(X[:, 0]) - 0.5 * np.nan_to_num(X[:, 1])
    y = signal + 0.5 * rng.normal(size=n_rows)
    names = ["feature_a", "feature_b", "feature_c", "feature_d"]

    regressor = PackBoostRegressor(n_estimators=4, pack_size=2, max_depth=3,
                                   min_samples_leaf=10, random_state=0)
    regressor.fit(X, y, era=era)
    classifier = PackBoostClassifier(n_estimators=3, pack_size=2, max_depth=2,
                                     min_samples_leaf=10, random_state=0)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        raise SystemExit("pandas is needed to write the classifier fixture with feature "
                         "names") from None
    frame = pd.DataFrame(X, columns=names)
    classifier.fit(frame, np.where(y > 0, "up", "down"), era=era)

    X_check = X[:12].copy()
    X_check[0] = np.nan
    expected = {
        "format_version": FORMAT_VERSION,
        "X": X_check.tolist(),
        "feature_names": names,
        "regressor_predict": regressor.predict(X_check).tolist(),
        "classifier_decision_function": classifier.decision_function(
            pd.DataFrame(X_check, columns=names)).tolist(),
        "classifier_predict_proba": classifier.predict_proba(
            pd.DataFrame(X_check, columns=names)).tolist(),
        "classifier_classes": classifier.classes_.tolist(),
    }
    if FORMAT_VERSION >= 2:
        # From version 2: a model with a categorical feature (integer codes in
        # column 4, one code unseen at fit and NaN among the rows to predict).
        codes = rng.integers(0, 6, size=n_rows).astype(np.float64)
        y_categorical = y + np.where(np.isin(codes, [1, 4]), 1.0, -0.5)
        categorical = PackBoostRegressor(n_estimators=4, pack_size=2, max_depth=3,
                                         min_samples_leaf=10, min_data_per_group=10,
                                         categorical_features=[4], random_state=0)
        X_categorical = np.column_stack([X, codes])
        categorical.fit(X_categorical, y_categorical, era=era)
        check = np.column_stack([X_check, codes[:12]])
        check[1, 4], check[2, 4] = np.nan, 17.0
        expected["categorical_X"] = [[None if np.isnan(value) else value for value in row]
                                     for row in check.tolist()]
        expected["categorical_predict"] = categorical.predict(check).tolist()
        categorical.save_model(HERE / f"model_v{FORMAT_VERSION}_categorical.pbm")
    regressor.save_model(paths[0])
    classifier.save_model(paths[1])
    paths[2].write_text(json.dumps(expected, indent=1) + "\n")
    for path in paths:
        print(f"wrote {path.relative_to(HERE.parent.parent)} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
