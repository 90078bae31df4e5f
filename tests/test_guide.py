"""The user guide's pages (docs/guide/) run as written: their ``bash`` blocks
(``packboost`` commands) and ``python`` blocks, in order, in one folder."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide"


def _run_page(page, folder, capsys):
    """Run every block of ``page`` in ``folder``; the commands' and the Python's output."""
    namespace = {"__name__": "guide"}
    printed = []
    for language, block in re.findall(r"```(bash|python)\n(.*?)```", page.read_text(), re.S):
        if language == "python":
            exec(compile(block, f"{page.name} python block", "exec"), namespace)
            printed.append(capsys.readouterr().out)
            continue
        for line in filter(None, (line.strip() for line in block.splitlines())):
            words = shlex.split(line)
            assert words[0] == "packboost", line
            done = subprocess.run([sys.executable, "-m", "packboost", *words[1:]], cwd=folder,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
            printed.append(done.stdout)
    return "\n".join(printed)


def test_many_targets_page_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    out = _run_page(GUIDE / "many-targets.md", tmp_path, capsys)
    assert "'numerai_mean[2]'" in out and "mean of 3" in out
    assert "3 targets ('target', 'target_aux', 'target_late')" in out
    assert "(output 2) on data/validation_aux.parquet, target 'target_late'" in out
    assert (tmp_path / "many.pbm").stat().st_size > 0
    assert "summary over 3 targets" in out
    from packboost._files import read_columns

    assert list(read_columns(tmp_path / "many.csv")) == [
        "id", "prediction_target", "prediction_target_aux", "prediction_target_late"]
    assert list(read_columns(tmp_path / "upload.csv")) == ["id", "prediction"]
