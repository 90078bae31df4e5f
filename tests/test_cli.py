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
