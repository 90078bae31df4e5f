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


def test_demo_compares_with_lightgbm_on_an_era_shift_case(capsys):
    pytest.importorskip("lightgbm")
    assert main(TINY_DEMO) == 0
    out = capsys.readouterr().out
    assert "make_sign_flip" in out and "reverses their effect" in out
    rows = [line.split()[0] for line in out.splitlines()
            if line.startswith(("PackBoost (DES)", "LightGBM", "linear (lstsq)"))]
    assert rows == ["PackBoost", "LightGBM", "linear"]
    assert "LGBMRegressor(n_estimators=3, max_depth=2, num_leaves=4" in out
    assert max(len(line) for line in out.splitlines()) <= 80  # an 80-column terminal


def test_demo_without_lightgbm_says_so(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # import lightgbm -> ImportError
    assert main(TINY_DEMO) == 0
    out = capsys.readouterr().out
    assert "LightGBM skipped: not installed" in out
    assert not any(line.startswith("LightGBM ") for line in out.splitlines())
    assert main([*TINY_DEMO, "--no-lightgbm"]) == 0
    assert "LightGBM" not in capsys.readouterr().out


@pytest.mark.parametrize("case", ["smooth_drift", "numerai_like"])
def test_demo_runs_the_other_cases(case, capsys):
    assert main([*TINY_DEMO, "--data", case, "--no-lightgbm"]) == 0
    out = capsys.readouterr().out
    assert f"make_{case}" in out and "linear (lstsq)" in out


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


# ----------------------------------------------------------------------------- outputs that
# are inputs: refused as usage errors (status 2) before any work, inputs untouched

N_SMALL = 240


def _small_columns(n_rows=N_SMALL, n_features=3, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    columns = {"id": np.array([f"n{i:04d}" for i in range(n_rows)], dtype=object),
               "era": np.repeat(np.arange(6), -(-n_rows // 6))[:n_rows]}
    columns.update({f"feature_{k}": rng.integers(0, 5, n_rows) for k in range(n_features)})
    columns["target"] = rng.random(n_rows)
    return columns


@pytest.fixture
def small(tmp_path, monkeypatch):
    """A scratch directory (the working directory) with data.csv, valid.csv,
    model.pbm (trained on data.csv), params.toml and features.json."""
    import json

    from packboost import PackBoostRegressor
    from packboost._files import write_columns

    monkeypatch.chdir(tmp_path)
    columns = _small_columns()
    write_columns(tmp_path / "data.csv", columns)
    write_columns(tmp_path / "valid.csv", _small_columns(seed=1))
    import numpy as np

    names = [f"feature_{k}" for k in range(3)]
    X = np.column_stack([columns[name] for name in names]).astype(float)
    model = PackBoostRegressor(n_estimators=2, max_depth=2, pack_size=1, n_jobs=1)
    model.fit(packboost._inputs.NamedMatrix(X, names), columns["target"],
              era=columns["era"]).save_model(tmp_path / "model.pbm")
    (tmp_path / "params.toml").write_text("max_depth = 2\n")
    (tmp_path / "features.json").write_text(json.dumps({"feature_sets": {"small": names}}))
    return tmp_path


def _snapshot(directory):
    return {path.name: path.read_bytes() for path in Path(directory).iterdir()
            if path.is_file() and not path.is_symlink()}


def _spellings(directory, name):
    """Other names of ``directory/name``: ./name, absolute, a symlink, a hard link."""
    directory = Path(directory)
    os.symlink(directory / name, directory / f"symlink-{name}")
    os.link(directory / name, directory / f"hardlink-{name}")
    return [name, f"./{name}", str(directory / name), f"sub/../{name}",
            f"symlink-{name}", f"hardlink-{name}"]


OUTPUT_IS_INPUT = [
    # (command line with {out} for the output spelling, the input's file name)
    (["predict", "model.pbm", "data.csv", "-o", "{out}"], "data.csv"),
    (["predict", "model.pbm", "data.csv", "-o", "{out}"], "model.pbm"),
    (["train", "data.csv", "-o", "{out}"], "data.csv"),
    (["train", "data.csv", "--valid", "valid.csv", "-o", "{out}"], "valid.csv"),
    (["train", "data.csv", "--config", "params.toml", "-o", "{out}"], "params.toml"),
    (["train", "data.csv", "--features-file", "features.json", "--feature-set", "small",
      "-o", "{out}"], "features.json"),
    (["train", "data.csv", "--init-model", "model.pbm", "-o", "{out}"], "model.pbm"),
    (["evaluate", "data.csv", "--prediction-column", "feature_0", "--csv", "{out}"],
     "data.csv"),
    (["evaluate", "data.csv", "--model", "model.pbm", "--csv", "{out}"], "model.pbm"),
    (["evaluate", "data.csv", "--prediction-column", "feature_0", "--png", "{out}"],
     "data.csv"),
]


@pytest.mark.parametrize("command, input_name", OUTPUT_IS_INPUT)
def test_an_output_that_is_an_input_is_refused_before_any_work(small, capsys, command,
                                                               input_name):
    (small / "sub").mkdir()
    spellings = _spellings(small, input_name)
    before = _snapshot(small)
    for spelling in spellings:
        argv = [spelling if item == "{out}" else item for item in command]
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.out == ""  # nothing read, trained or written
        assert f"packboost {command[0]}: error: " in captured.err
        assert "would replace the input" in captured.err
        assert _snapshot(small) == before  # every input byte-identical
        assert (small / f"symlink-{input_name}").is_symlink()
    assert sorted(path.name for path in small.iterdir()) == sorted(
        [*before, f"symlink-{input_name}", "sub"])  # no new or temporary file


def test_train_default_output_is_checked_too(small, capsys):
    (small / "model.pbm").rename(small / "old.pbm")
    os.symlink("old.pbm", small / "model.pbm")  # default -o model.pbm -> the init model
    before = (small / "old.pbm").read_bytes()
    assert main(["train", "data.csv", "--init-model", "old.pbm"]) == 2
    assert "-o/--output 'model.pbm' is the input --init-model 'old.pbm'" in capsys.readouterr().err
    assert (small / "old.pbm").read_bytes() == before


@pytest.mark.parametrize("argv, message", [
    (["evaluate", "data.csv", "--prediction-column", "feature_0", "--csv", "r.csv",
      "--png", "./r.csv"], "are the same file"),
    ([*TINY_DEMO, "--output", "out.pbm", "--png", "out.pbm"], "are the same file"),
    ([*TINY_DEMO, "--export", "exported", "--export-format", "csv", "--output",
      "exported/train.csv"], "are the same file"),
    (["predict", "model.pbm", "data.csv", "-o", "missing/p.csv"], "no directory"),
    (["predict", "model.pbm", "data.csv", "-o", "sub"], "is a directory"),
    (["predict", "model.pbm", "data.csv", "-o", "p.txt"], "expected a .csv or .parquet"),
    (["train", "data.csv", "-o", "missing/model.pbm"], "no directory"),
    (["evaluate", "data.csv", "--prediction-column", "feature_0", "--csv", "r.json"],
     "expected a .csv or .parquet"),
    ([*TINY_DEMO, "--export", "data.csv"], "is a file, not a directory"),
])
def test_unwritable_or_clashing_outputs_are_usage_errors(small, capsys, argv, message):
    pytest.importorskip("matplotlib")
    (small / "sub").mkdir()
    before = _snapshot(small)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"packboost {argv[0]}: error: " in captured.err and message in captured.err
    assert _snapshot(small) == before


# ----------------------------------------------------------------------------- the id column of
# predictions is never lost


def _read_csv_rows(path):
    import csv

    with open(path, newline="") as handle:
        return list(csv.reader(handle))


@pytest.mark.parametrize("extra, message", [
    (["--prediction-column", "id"], "would replace the ids"),
    (["--id-column", "feature_1", "--prediction-column", "feature_1"], "would replace the ids"),
    (["--prediction-column", ""], "empty name"),
])
def test_prediction_column_never_replaces_the_id_column(small, capsys, extra, message):
    before = _snapshot(small)
    assert main(["predict", "model.pbm", "data.csv", "-o", "p.csv", *extra]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") >= 1 and message in captured.err
    assert "packboost predict: error: " in captured.err
    assert _snapshot(small) == before and not (small / "p.csv").exists()


def test_an_id_column_named_prediction_is_kept(small, capsys):
    from packboost._files import read_columns, write_columns

    columns = _small_columns()
    columns["prediction"] = columns.pop("id")
    write_columns("ids.csv", columns)
    assert main(["predict", "model.pbm", "ids.csv", "--id-column", "prediction",
                 "-o", "p.csv"]) == 2
    assert "--prediction-column" in capsys.readouterr().err
    assert main(["predict", "model.pbm", "ids.csv", "--id-column", "prediction",
                 "--prediction-column", "score", "-o", "p.csv"]) == 0
    rows = _read_csv_rows(small / "p.csv")
    assert rows[0] == ["prediction", "score"]
    assert [row[0] for row in rows[1:]] == list(read_columns("ids.csv")["prediction"])


def test_duplicated_id_columns_are_refused(small, capsys):
    text = (small / "data.csv").read_text().splitlines()
    text[0] = text[0].replace("era", "id", 1)
    (small / "twice.csv").write_text("\n".join(text) + "\n")
    assert main(["predict", "model.pbm", "twice.csv", "-o", "p.csv"]) == 1
    err = capsys.readouterr().err
    assert "duplicated column names ['id']" in err and "twice.csv" in err
    assert not (small / "p.csv").exists()


def test_data_without_an_id_column_says_so(small, capsys):
    from packboost._files import write_columns

    columns = _small_columns()
    del columns["id"]
    write_columns("noid.csv", columns)
    assert main(["predict", "model.pbm", "noid.csv", "-o", "p.csv"]) == 0
    assert "has no 'id' column" in capsys.readouterr().out
    rows = _read_csv_rows(small / "p.csv")
    assert rows[0] == ["prediction"] and len(rows) == N_SMALL + 1


# ----------------------------------------------------------------------------- expected errors
# are one line, "packboost COMMAND: error: ...", status 1; bugs keep their traceback


def _one_line_error(capsys, command):
    err = capsys.readouterr().err
    assert err.startswith(f"packboost {command}: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_cuda_unavailable_is_a_one_line_error_before_reading_data(small, capsys, monkeypatch):
    import packboost._device
    from packboost import CudaError

    def no_gpu():
        raise CudaError("device='cuda' needs a usable NVIDIA GPU: no CUDA device found", 100)

    monkeypatch.setattr(packboost._device, "require_cuda", no_gpu)
    monkeypatch.setattr(packboost._files, "read_columns",
                        lambda *a, **k: pytest.fail("read the data before the device check"))
    assert main(["train", "data.csv", "--device", "cuda", "-o", "m.pbm"]) == 1
    assert "no CUDA device found" in _one_line_error(capsys, "train")
    assert not (small / "m.pbm").exists()


@pytest.mark.parametrize("error", [
    "packboost.CudaError('cudaErrorMemoryAllocation: out of memory', 2)",
    "MemoryError()",
    "OSError('Truncated compressed stream\\nsecond line')",
])
def test_expected_errors_raised_while_fitting_are_one_line(small, capsys, monkeypatch, error):
    from packboost import PackBoostRegressor

    def fail(*args, **kwargs):
        raise eval(error)  # noqa: S307 (test input)

    monkeypatch.setattr(PackBoostRegressor, "fit", fail)
    assert main(["train", "data.csv", "-o", "m.pbm"]) == 1
    _one_line_error(capsys, "train")
    assert not (small / "m.pbm").exists()


def test_a_genuine_bug_keeps_its_traceback(small, monkeypatch):
    from packboost import PackBoostRegressor

    def bug(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(PackBoostRegressor, "fit", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["train", "data.csv", "-o", "m.pbm"])


@pytest.mark.parametrize("content, message", [
    (b'{"feature_sets": {"small": ["feature_0"', "not valid JSON"),
    ('["f\u00e9ature_0"]'.encode("latin-1"), "not UTF-8 text (byte 0xe9"),
    (b"42", "expected a list of feature names, got a number"),
    (b'"feature_0"', "expected a list of feature names, got a string"),
    (b"[1, 2]", "expected a list of feature names (strings)"),
    (b'{"feature_sets": ["feature_0"]}', "expected a dict of feature sets"),
    (b'{"feature_sets": {"big": ["feature_0"]}}', "no feature set 'small'"),
    (b'{"feature_sets": {"small": "feature_0"}}', "expected a list of feature names"),
    (b'{"feature_sets": {"small": []}}', "no feature names"),
    (b'["feature_0", "feature_0"]', "duplicated feature names ['feature_0']"),
    (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
])
def test_bad_features_files_name_the_file(small, capsys, content, message):
    (small / "f.json").write_bytes(content)
    assert main(["train", "data.csv", "--features-file", "f.json", "--feature-set", "small"]
                if content.startswith(b"{") else
                ["train", "data.csv", "--features-file", "f.json"]) == 1
    err = _one_line_error(capsys, "train")
    assert "f.json" in err and message in err, err
    assert not (small / "model.pbm.new").exists()


@pytest.mark.parametrize("features", ["feature_0,target", "feature_*,era"])
def test_the_target_or_era_is_never_a_feature(small, capsys, features):
    assert main(["train", "data.csv", "--features", features, "-o", "m.pbm"]) == 1
    assert "is also among the features" in _one_line_error(capsys, "train")


def test_a_features_list_with_feature_set_is_refused(small, capsys):
    (small / "f.json").write_text('["feature_0"]')
    assert main(["train", "data.csv", "--features-file", "f.json", "--feature-set", "x"]) == 1
    assert "drop --feature-set" in _one_line_error(capsys, "train")


@pytest.mark.parametrize("content, message", [
    ("max_depth = 2\n# caf\u00e9\n".encode("latin-1"), "not UTF-8 text"),
    (b"a = " + b"[" * 100_000 + b"]" * 100_000, "--config"),
    (b"params = 3\n", "[params] must be a table"),
    (b"max_depth = -2\n", "max_depth"),
])
def test_bad_config_files_are_one_line_errors(small, capsys, content, message):
    (small / "c.toml").write_bytes(content)
    assert main(["train", "data.csv", "--config", "c.toml", "-o", "m.pbm"]) == 1
    assert message in _one_line_error(capsys, "train")
    assert not (small / "m.pbm").exists()


@pytest.mark.parametrize("command", [
    ["train", "empty_target.csv"],
    ["evaluate", "empty_target.csv", "--prediction-column", "feature_0"],
    ["train", "data.csv", "--valid", "empty_target.csv"],
])
def test_an_all_missing_target_is_called_missing(small, capsys, command):
    text = (small / "data.csv").read_text().splitlines()
    (small / "empty_target.csv").write_text(
        "\n".join([text[0]] + [line.rsplit(",", 1)[0] + "," for line in text[1:]]) + "\n")
    assert main([*command, "-o", "m.pbm"] if command[0] == "train" else command) == 1
    err = _one_line_error(capsys, command[0])
    assert "target column 'target' is entirely missing" in err and "not numeric" not in err


@pytest.mark.parametrize("rename", ["feature_2:target", "feature_2:feature_0", "era:id"])
def test_duplicated_csv_headers_are_refused(small, capsys, rename):
    old, new = rename.split(":")
    text = (small / "data.csv").read_text().splitlines()
    text[0] = text[0].replace(old, new)
    (small / "twice.csv").write_text("\n".join(text) + "\n")
    assert main(["train", "twice.csv", "-o", "m.pbm"]) == 1
    err = _one_line_error(capsys, "train")
    assert f"twice.csv: duplicated column names ['{new}']" in err
    assert not (small / "m.pbm").exists()


def test_duplicated_parquet_columns_are_refused(small, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    columns = _small_columns()
    table = pa.Table.from_arrays([pa.array(values) for values in columns.values()]
                                 + [pa.array(columns["feature_0"])],
                                 names=[*columns, "target"])
    pq.write_table(table, small / "twice.parquet")
    assert main(["train", "twice.parquet", "-o", "m.pbm"]) == 1
    assert "duplicated column names ['target']" in _one_line_error(capsys, "train")


@pytest.mark.parametrize("name, content, message", [
    ("empty.csv", b"", "empty file"),
    ("latin.csv", "id,era,feature_0,feature_1,feature_2,target\nf\u00e9,1,2,3,4,0.5\n"
     .encode("latin-1"), "not UTF-8"),
    ("ragged.csv", b"id,era,feature_0,feature_1,feature_2,target\na,1,2,3,4,0.5,9\n",
     "cannot read"),
    ("cut.parquet", b"PAR1\x00\x00garbage", "cannot read"),
    ("cut.csv.gz", None, "cannot read"),
])
def test_unreadable_data_files_are_one_line_errors_naming_the_file(small, capsys, name,
                                                                    content, message):
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    if content is None:
        import gzip

        content = gzip.compress((small / "data.csv").read_bytes())[:300]
    (small / name).write_bytes(content)
    assert main(["train", name, "-o", "m.pbm"]) == 1
    err = _one_line_error(capsys, "train")
    assert name in err and message in err
    assert main(["predict", "model.pbm", name, "-o", "p.csv"]) == 1
    err = _one_line_error(capsys, "predict")
    assert name in err
    assert not (small / "m.pbm").exists() and not (small / "p.csv").exists()


def test_evaluate_refuses_a_non_numeric_prediction_column_by_name(small, capsys):
    assert main(["evaluate", "data.csv", "--prediction-column", "id"]) == 1
    assert "prediction column 'id' is not numeric" in _one_line_error(capsys, "evaluate")


def test_outputs_are_written_whole_and_charts_atomically(small, capsys):
    pytest.importorskip("matplotlib")
    assert main(["evaluate", "data.csv", "--prediction-column", "feature_0", "--csv",
                 "r.csv.gz", "--png", "r.png", "--summary-only"]) == 0
    from packboost._files import read_columns

    assert list(read_columns(small / "r.csv.gz"))[:2] == ["era", "n_rows"]
    assert (small / "r.png").read_bytes().startswith(b"\x89PNG")
    assert not [path.name for path in small.iterdir() if path.name.startswith(".")]


def test_a_target_pattern_naming_several_columns_trains_them_all(tmp_path, capsys):
    """``--target 'target*'``: one model of both targets (the auxiliary one NaN
    in some rows), the model a 2-D fit in Python gives, that keeps their
    names; ``evaluate`` scores each output on its target, ``predict`` writes
    a column per target."""
    import numpy as np
    import pyarrow.parquet as pq

    from packboost._files import read_columns
    from packboost.reports import era_report, format_target_summaries

    _write_numerai_files(tmp_path)
    arguments = ["--n-estimators", "4", "--max-depth", "3", "--seed", "0", "--n-jobs", "1"]
    assert main(["train", str(tmp_path / "train.parquet"), "--target", "target*", "--valid",
                 str(tmp_path / "valid.parquet"), "-o", str(tmp_path / "m.pbm"),
                 *arguments]) == 0
    out = capsys.readouterr().out
    assert "2 targets ('target', 'target_aux')" in out
    assert "target 'target_aux' is missing in" in out
    assert "valid per-era correlation, target 'target_aux'" in out
    model = packboost.load_model(tmp_path / "m.pbm")
    assert model.ensemble_.n_outputs == 2
    frame = pq.read_table(tmp_path / "train.parquet").to_pandas()
    features = [f"feature_{k}" for k in range(6)]
    Y = frame[["target", "target_aux"]].to_numpy(dtype=np.float64)
    expected = packboost.PackBoostRegressor(n_estimators=4, max_depth=3, random_state=0,
                                            n_jobs=1).fit(frame[features], Y, era=frame["era"])
    np.testing.assert_array_equal(model.predict(frame[features]),
                                  expected.predict(frame[features]))

    assert list(model.target_names_) == ["target", "target_aux"]

    evaluate = ["evaluate", str(tmp_path / "valid.parquet"), "--model", str(tmp_path / "m.pbm")]
    assert main([*evaluate, "--target", "target*", "--summary-only"]) == 0
    out = capsys.readouterr().out
    assert "(output 0) on" in out and "target 'target':" in out
    assert "(output 1) on" in out and "target 'target_aux':" in out
    assert "summary over 2 targets" in out and "mean of 2" in out
    # Without --target: the targets the model was trained on, matched by name.
    assert main([*evaluate, "--summary-only"]) == 0
    assert capsys.readouterr().out == out
    valid = pq.read_table(tmp_path / "valid.parquet").to_pandas()
    predictions = model.predict(valid[features])
    known = valid["target_aux"].notna().to_numpy()
    aux = era_report(valid["target_aux"].to_numpy()[known], predictions[known, 1],
                     valid["era"].to_numpy()[known])
    assert aux.format_summary() in out
    main_target = era_report(valid["target"].to_numpy(), predictions[:, 0], valid["era"])
    table = format_target_summaries({"target": main_target, "target_aux": aux})
    assert table in out
    # One of the targets, by name: its own output.
    assert main([*evaluate, "--target", "target_aux", "--summary-only"]) == 0
    out = capsys.readouterr().out
    assert "(output 1) on" in out and "(output 0)" not in out and "summary over" not in out
    assert aux.format_summary() in out
    assert main([*evaluate, "--target", "target,era"]) == 1
    assert "--target names others: ['era']" in _one_line_error(capsys, "evaluate")
    assert main(["evaluate", str(tmp_path / "live.parquet"), "--model",
                 str(tmp_path / "m.pbm")]) == 1
    assert "no column of the model's targets" in _one_line_error(capsys, "evaluate")

    # predict: a column per target, named after it; or one target's output.
    predict = ["predict", str(tmp_path / "m.pbm"), str(tmp_path / "valid.parquet")]
    assert main([*predict, "-o", str(tmp_path / "p.csv")]) == 0
    written = read_columns(tmp_path / "p.csv")
    assert list(written) == ["id", "prediction_target", "prediction_target_aux"]
    for index, name in enumerate(["prediction_target", "prediction_target_aux"]):
        np.testing.assert_allclose(np.asarray(written[name], dtype=float),
                                   predictions[:, index], rtol=1e-12)
    assert main([*predict, "-o", str(tmp_path / "aux.csv"), "--target", "target_aux"]) == 0
    written = read_columns(tmp_path / "aux.csv")
    assert list(written) == ["id", "prediction"]
    np.testing.assert_allclose(np.asarray(written["prediction"], dtype=float),
                               predictions[:, 1], rtol=1e-12)
    assert main([*predict, "-o", str(tmp_path / "x.csv"), "--target", "target_x"]) == 1
    assert "not one of the model's targets" in _one_line_error(capsys, "predict")

    # A model of several targets fitted on an array has no target names: its
    # outputs are numbered, and scored on the --target columns in file order.
    unnamed = tmp_path / "unnamed.pbm"
    expected.save_model(unnamed)
    assert main(["predict", str(unnamed), str(tmp_path / "valid.parquet"), "-o",
                 str(tmp_path / "u.csv")]) == 0
    assert list(read_columns(tmp_path / "u.csv")) == ["id", "prediction_0", "prediction_1"]
    assert main(["predict", str(unnamed), str(tmp_path / "valid.parquet"), "-o",
                 str(tmp_path / "u1.csv"), "--target", "1"]) == 0
    np.testing.assert_allclose(np.asarray(read_columns(tmp_path / "u1.csv")["prediction"],
                                          dtype=float), predictions[:, 1], rtol=1e-12)
    assert main(["evaluate", str(tmp_path / "valid.parquet"), "--model", str(unnamed),
                 "--target", "target"]) == 1
    assert "the model has 2 targets" in _one_line_error(capsys, "evaluate")
    assert main(["train", str(tmp_path / "train.parquet"), "--target", "target*",
                 "--classifier", "-o", str(tmp_path / "c.pbm")]) == 1
    assert "--classifier trains one target" in _one_line_error(capsys, "train")
    assert not (tmp_path / "c.pbm").exists()


def test_multiclass_is_refused_by_train_predicted_a_column_per_class(small, capsys):
    import numpy as np

    from packboost import PackBoostClassifier
    from packboost._files import read_columns, write_columns

    columns = _small_columns()
    columns["target"] = np.arange(len(columns["target"])) % 3
    write_columns(small / "three.csv", columns)
    assert main(["train", "three.csv", "--classifier", "-o", "m.pbm"]) == 1
    assert "has 3 labels" in _one_line_error(capsys, "train")
    X = np.column_stack([columns[f"feature_{k}"] for k in range(3)]).astype(float)
    PackBoostClassifier(n_estimators=2, n_jobs=1).fit(
        packboost._inputs.NamedMatrix(X, [f"feature_{k}" for k in range(3)]),
        columns["target"]).save_model(small / "three.pbm")
    assert main(["predict", "three.pbm", "three.csv", "-o", "p.csv"]) == 0
    model = packboost.load_model(small / "three.pbm")
    written = read_columns(small / "p.csv")
    assert list(written) == ["id", "prediction_0", "prediction_1", "prediction_2"]
    probabilities = model.predict_proba(
        packboost._inputs.NamedMatrix(X, [f"feature_{k}" for k in range(3)]))
    for label in range(3):
        np.testing.assert_allclose(np.asarray(written[f"prediction_{label}"], dtype=float),
                                   probabilities[:, label], rtol=1e-12)
    assert main(["predict", "three.pbm", "three.csv", "-o", "q.csv", "--target", "0"]) == 2
    assert "the model has one target" in capsys.readouterr().err
    assert main(["evaluate", "three.csv", "--model", "three.pbm"]) == 1
    assert "3 outputs" in _one_line_error(capsys, "evaluate")


def test_constraints_from_the_config_file_and_json_flags(small, capsys):
    """TOML gives the constraints as TOML (a table by name); the flags take JSON."""
    (small / "c.toml").write_text("[params]\nn_estimators = 2\n"
                                  "[params.monotone_constraints]\nfeature_0 = 1\n")
    assert main(["train", "data.csv", "--config", "c.toml", "--interaction-constraints",
                 '[["feature_0", "feature_1"]]', "-o", "m.pbm", "--n-jobs", "1"]) == 0
    model = packboost.load_model(small / "m.pbm")
    assert model.monotone_constraints == {"feature_0": 1}
    assert model.interaction_constraints == [["feature_0", "feature_1"]]
    capsys.readouterr()
    assert main(["train", "data.csv", "--monotone-constraints", "[1, 0]", "-o", "x.pbm"]) == 1
    assert "monotone_constraints has 2 entries" in _one_line_error(capsys, "train")
    assert main(["train", "data.csv", "--monotone-constraints", "{feature_0: 1}"]) == 2
    assert "--monotone-constraints: invalid JSON value" in capsys.readouterr().err


def test_config_keys_at_the_top_level_and_under_params_are_all_used(small, capsys):
    """Top-level keys beside a [params] table were dropped: the run exited 0
    with the default n_estimators where the file said 3."""
    (small / "c.toml").write_text("n_estimators = 3\n\n[params]\nmax_depth = 2\n")
    assert main(["train", "data.csv", "--config", "c.toml", "-o", "m.pbm",
                 "--n-jobs", "1"]) == 0
    model = packboost.load_model(small / "m.pbm")
    assert (model.n_estimators, model.max_depth, model.n_iter_) == (3, 2, 3)
    capsys.readouterr()


@pytest.mark.parametrize("content, message", [
    ("[params]\nmax_depth = 2\n[training]\nn_estimators = 3\n", "[training]"),
    ("[training]\nn_estimators = 3\n", "[training]"),
    ("[params.extra]\nn_estimators = 3\n", "unknown parameter 'extra'"),
    ("max_depth = 2\n[params]\nmax_depth = 3\n", "'max_depth' is given twice"),
])
def test_config_keys_the_command_would_not_use_are_refused(small, capsys, content, message):
    (small / "c.toml").write_text(content)
    assert main(["train", "data.csv", "--config", "c.toml", "-o", "m.pbm"]) == 1
    assert message in _one_line_error(capsys, "train")
    assert not (small / "m.pbm").exists()


@pytest.mark.parametrize("command, message", [
    (["train", "data.csv", "--features", ","], "--features ',' selects no feature"),
    (["train", "data.csv", "--features", " "], "--features ' ' selects no feature"),
    (["train", "data.csv", "--target", ","], "--target ',' selects no target column"),
    (["train", "data.csv", "--valid", "valid.csv", "--eval-metric", ","],
     "--eval-metric ',' selects no metric"),
    (["predict", "model.pbm", "data.csv", "-o", "p.csv", "--features", ","],
     "--features ',' selects no feature"),
    (["evaluate", "valid.csv", "--model", "model.pbm", "--features", ","],
     "--features ',' selects no feature"),
    (["evaluate", "valid.csv", "--prediction-column", "feature_0", "--methods", ","],
     "--methods ',' selects no correlation method"),
])
def test_an_empty_list_option_says_that_it_selects_nothing(small, capsys, command, message):
    """`--features ","` ended in "Found array with 0 sample(s) (shape=(0, 0))"."""
    assert main(command) == 1
    assert message in _one_line_error(capsys, command[0])


# ----------------------------------------------------------------------------- categorical


def _write_category_files(directory):
    """A parquet file whose 'sector' column is a pandas category (saved as a
    dictionary column), and the same rows as CSV (plain strings)."""
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(5)
    n_rows = 1200
    sector = rng.choice(["banks", "energy", "retail", "tech", "media", "autos"], n_rows)
    x = rng.normal(size=n_rows)
    frame = pd.DataFrame({
        "era": np.repeat(np.arange(12), n_rows // 12),
        "feature_sector": pd.Categorical(sector),
        "feature_x": x,
        "target": np.where(np.isin(sector, ["tech", "media"]), 1.0, 0.0) + 0.3 * x
        + rng.normal(size=n_rows)})
    frame.loc[::29, "feature_sector"] = None
    frame.to_parquet(directory / "train.parquet")
    frame.to_csv(directory / "train.csv", index=False)
    return frame


def test_train_and_predict_with_categorical_columns(tmp_path, capsys):
    np = pytest.importorskip("numpy")
    frame = _write_category_files(tmp_path)
    flags = ["--n-estimators", "4", "--max-depth", "3", "--min-data-per-group", "20",
             "--n-jobs", "1", "--seed", "0"]
    # parquet: categorical by its type
    assert main(["train", str(tmp_path / "train.parquet"), "-o", str(tmp_path / "p.pbm"),
                 *flags]) == 0
    assert "categorical by type: 'feature_sector'" in capsys.readouterr().out
    # CSV: plain strings, named by --categorical-features
    assert main(["train", str(tmp_path / "train.csv"), "-o", str(tmp_path / "c.pbm"),
                 "--categorical-features", '["feature_sector"]', *flags]) == 0
    from packboost import PackBoostRegressor, load_model

    expected = PackBoostRegressor(n_estimators=4, max_depth=3, min_data_per_group=20,
                                  n_jobs=1, random_state=0,
                                  categorical_features=["feature_sector"])
    features = frame[["feature_sector", "feature_x"]]
    expected.fit(features, frame["target"].to_numpy(), era=frame["era"].to_numpy())
    assert np.any(expected.ensemble_.nodes["threshold_bin"] == -1)
    for name in ("p.pbm", "c.pbm"):
        model = load_model(tmp_path / name)
        assert model.category_encoder_.categories == expected.category_encoder_.categories
        np.testing.assert_array_equal(model.ensemble_.nodes["category_words"],
                                      expected.ensemble_.nodes["category_words"])
        np.testing.assert_array_equal(model.predict(features), expected.predict(features))
    # predict and evaluate read the labels of the model's categorical columns
    assert main(["predict", str(tmp_path / "p.pbm"), str(tmp_path / "train.csv"),
                 "-o", str(tmp_path / "out.csv")]) == 0
    from packboost import _files

    written = _files.read_columns(tmp_path / "out.csv")["prediction"]
    np.testing.assert_allclose(written, expected.predict(features), rtol=1e-12)
    assert main(["evaluate", str(tmp_path / "train.parquet"), "--model",
                 str(tmp_path / "p.pbm"), "--feature-neutral", "--summary-only"]) == 0
    # a string column that is not named is refused, naming the way out
    capsys.readouterr()
    assert main(["train", str(tmp_path / "train.csv"), "-o", str(tmp_path / "x.pbm"),
                 *flags]) != 0
    assert "non-numeric column 'feature_sector'" in capsys.readouterr().err
