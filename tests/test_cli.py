"""Tests of the ``packboost`` command line (packboost.cli, python -m packboost)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import packboost
from packboost.cli import main

TINY_DEMO = [
    "demo", "--rows", "3000", "--features", "8", "--eras", "12",
    "--rounds", "3", "--pack-size", "2", "--max-depth", "2", "--n-jobs", "1", "--seed", "1",
]


def _run_module(args, tmp_path):
    """``python -m packboost ARGS`` in a scratch directory, importing the same packboost."""
    env = dict(os.environ)
    package_parent = str(Path(packboost.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "packboost", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )


def test_demo_runs_and_prints_summary(tmp_path):
    result = _run_module(TINY_DEMO, tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "3000 rows x 8 features" in out
    assert "held-out per-era Pearson correlation (3 eras)" in out
    for word in ("fit:", "mean", "std", "sharpe", "worst", "max_drawdown",
                 "PackBoost", "linear (lstsq)"):
        assert word in out


def test_bad_option_exits_2(tmp_path):
    result = _run_module(["demo", "--no-such-option"], tmp_path)
    assert result.returncode == 2
    assert "usage:" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--rows", "zero"],
        ["demo", "--rounds", "0"],
        ["demo", "--learning-rate", "-1"],
        ["demo", "--eras", "1"],
        ["demo", "--rows", "5", "--eras", "10"],
        ["no-such-command"],
        [],
    ],
)
def test_usage_errors_return_2(capsys, args):
    assert main(args) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_and_version_return_0(capsys):
    assert main(["--help"]) == 0
    assert main(["demo", "--help"]) == 0
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "--pack-size" in out and packboost.__version__ in out


# ----------------------------------------------------------------------------- train, predict,
# evaluate on files written here


def _write_numerai_files(directory, n_rows=2400, n_eras=16):
    """Numerai-shaped parquet files: id, era, int8 feature_* and two targets."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    np = pytest.importorskip("numpy")
    from packboost.datasets import make_numerai_like

    data = make_numerai_like(n_rows=n_rows, n_features=6, n_eras=n_eras, signal=0.3,
                             random_state=0)
    columns = {"id": [f"n{i:05d}" for i in range(n_rows)],
               "era": [f"era{e:03d}" for e in data.era]}
    columns.update({f"feature_{k}": data.X[:, k].astype(np.int8) for k in range(6)})
    columns["target"] = data.y.astype(np.float32)
    auxiliary = data.y[::-1].astype(np.float64)
    auxiliary[::9] = np.nan  # auxiliary targets have gaps
    columns["target_aux"] = auxiliary
    table = pa.table(columns)
    is_valid = np.asarray(data.era) >= n_eras * 3 // 4
    paths = {}
    for name, rows in [("train", ~is_valid), ("valid", is_valid)]:
        paths[name] = Path(directory) / f"{name}.parquet"
        pq.write_table(table.filter(pa.array(rows)), paths[name])
    paths["live"] = Path(directory) / "live.parquet"
    pq.write_table(table.filter(pa.array(is_valid)).drop_columns(["target", "target_aux"]),
                   paths["live"])
    return paths


def test_train_predict_evaluate_through_the_command_line(tmp_path):
    pytest.importorskip("matplotlib")
    pq = pytest.importorskip("pyarrow.parquet")
    paths = _write_numerai_files(tmp_path)
    (tmp_path / "params.toml").write_text(
        "[params]\nmax_depth = 3\nlearning-rate = 0.2\npack_size = 2\nn_estimators = 30\n")
    train = _run_module(["train", "train.parquet", "--valid", "valid.parquet", "--config",
                         "params.toml", "--n-estimators", "20", "--early-stopping-rounds", "3",
                         "--eval-metric", "numerai_mean,rmse", "--log-every", "5",
                         "--seed", "0", "--n-jobs", "1", "-o", "model.pbm"], tmp_path)
    assert train.returncode == 0, train.stderr
    out = train.stdout
    assert "1800 rows x 6 features, 12 eras, target 'target'" in out
    assert "n_estimators=20" in out and "max_depth=3" in out  # flags beat the file
    assert "valid numerai_mean=" in out and "saved: model.pbm" in out
    assert (tmp_path / "model.pbm").stat().st_size > 0

    model = packboost.load_model(tmp_path / "model.pbm")
    assert list(model.feature_names_in_) == [f"feature_{k}" for k in range(6)]
    assert model.max_depth == 3 and model.learning_rate == 0.2

    predict = _run_module(["predict", "model.pbm", "live.parquet", "-o", "predictions.csv"],
                          tmp_path)
    assert predict.returncode == 0, predict.stderr
    lines = (tmp_path / "predictions.csv").read_text().splitlines()
    assert lines[0] == "id,prediction" and len(lines) == 601
    live = pq.read_table(paths["live"]).to_pandas()
    written = [float(line.split(",")[1]) for line in lines[1:]]
    expected = model.predict(live[[f"feature_{k}" for k in range(6)]])
    assert [line.split(",")[0] for line in lines[1:]] == live["id"].tolist()
    assert max(abs(a - b) for a, b in zip(written, expected, strict=True)) < 1e-12

    evaluate = _run_module(["evaluate", "valid.parquet", "--model", "model.pbm",
                            "--target", "target*", "--png", "report.png", "--csv",
                            "report.csv"], tmp_path)
    assert evaluate.returncode == 0, evaluate.stderr
    out = evaluate.stdout
    assert "target 'target': 600 rows, 4 eras" in out
    assert "rows without a 'target_aux' value are skipped" in out
    for word in ("era012", "numerai_cum", "sharpe", "max_drawdown"):
        assert word in out
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "report.png").stat().st_size > 10_000
    header = (tmp_path / "report.csv").read_text().splitlines()[0]
    assert header.startswith("era,n_rows,target_pearson")


def test_evaluate_a_prediction_column_and_feature_neutral(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    import numpy as np
    import pyarrow.parquet as pq

    paths = _write_numerai_files(tmp_path)
    table = pq.read_table(paths["valid"])
    signal = np.asarray(table.column("feature_0"), dtype=float)
    pq.write_table(table.append_column("prediction", [signal]), tmp_path / "scored.parquet")
    assert main(["evaluate", str(tmp_path / "scored.parquet"), "--prediction-column",
                 "prediction", "--feature-neutral", "--methods", "numerai",
                 "--summary-only"]) == 0
    out = capsys.readouterr().out
    assert "column 'prediction'" in out and "feature_neutral" in out
    assert "numerai_cum" not in out  # summary only


def test_train_on_csv_with_feature_patterns_and_classifier(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    paths = _write_numerai_files(tmp_path)
    frame = pq.read_table(paths["train"]).to_pandas()
    frame["label"] = (frame["target"] > 0.5).map({True: "up", False: "down"})
    frame.to_csv(tmp_path / "train.csv", index=False)
    assert main(["train", str(tmp_path / "train.csv"), "--features", "feature_1,feature_4*",
                 "--target", "label", "--classifier", "--n-estimators", "3",
                 "-o", str(tmp_path / "clf.pbm")]) == 0
    model = packboost.load_model(tmp_path / "clf.pbm")
    assert list(model.feature_names_in_) == ["feature_1", "feature_4"]
    assert list(model.classes_) == ["down", "up"]
    assert main(["predict", str(tmp_path / "clf.pbm"), str(paths["live"]), "-o",
                 str(tmp_path / "p.parquet")]) == 0
    predictions = pq.read_table(tmp_path / "p.parquet").column("prediction").to_numpy()
    assert ((predictions > 0) & (predictions < 1)).all()  # probabilities of "up"
    capsys.readouterr()


@pytest.mark.parametrize("args, message", [
    (["train", "absent.parquet"], "no such file"),
    (["train", "train.parquet", "--target", "nope"], "no column matches 'nope'"),
    (["train", "train.parquet", "--era", "nope"], "no era column 'nope'"),
    (["train", "train.parquet", "--early-stopping-rounds", "2"], "needs --valid"),
    (["train", "train.parquet", "--config", "bad.toml"], "unknown parameter 'depth'"),
    (["predict", "train.parquet", "live.parquet", "-o", "x.csv"], ""),
    (["evaluate", "valid.parquet", "--prediction-column", "nope"], "no prediction column"),
])
def test_failed_runs_exit_1_with_a_message(tmp_path, monkeypatch, capsys, args, message):
    _write_numerai_files(tmp_path)
    (tmp_path / "bad.toml").write_text("depth = 3\n")
    monkeypatch.chdir(tmp_path)
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"packboost {args[0]}: error: ") and message in err


def test_every_estimator_parameter_has_a_train_flag(capsys):
    from packboost.sklearn import _PARAMETER_RULES

    assert main(["train", "--help"]) == 0
    help_text = capsys.readouterr().out
    for name in _PARAMETER_RULES:
        assert "--" + name.replace("_", "-") in help_text
    assert "--seed" in help_text and "--n-jobs" in help_text


def test_demo_saves_model_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    assert main([*TINY_DEMO, "--png", str(tmp_path / "demo.png"),
                 "--output", str(tmp_path / "demo.pbm")]) == 0
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    assert packboost.load_model(tmp_path / "demo.pbm").n_iter_ == 3


def test_train_continues_a_model_and_reads_feature_sets(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    import json

    paths = _write_numerai_files(tmp_path)
    (tmp_path / "features.json").write_text(json.dumps(
        {"feature_sets": {"small": ["feature_0", "feature_2"], "all": []}}))
    common = [str(paths["train"]), "--features-file", str(tmp_path / "features.json"),
              "--feature-set", "small", "--n-estimators", "2", "--seed", "0"]
    assert main(["train", *common, "-o", str(tmp_path / "a.pbm")]) == 0
    assert main(["train", *common, "--init-model", str(tmp_path / "a.pbm"),
                 "-o", str(tmp_path / "b.pbm")]) == 0
    first, second = (packboost.load_model(tmp_path / name) for name in ("a.pbm", "b.pbm"))
    assert list(second.feature_names_in_) == ["feature_0", "feature_2"]
    assert (first.n_iter_, second.n_iter_) == (2, 4)
    assert main(["train", str(paths["train"]), "--features-file",
                 str(tmp_path / "features.json")]) == 1
    assert "--feature-set" in capsys.readouterr().err
