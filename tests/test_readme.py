"""The README's Python examples run as written (a new user's first steps)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 5
    monkeypatch.chdir(tmp_path)  # the examples write model.pbm and PNG files
    namespace = {"__name__": "readme"}
    for index, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {index}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "max_drawdown" in out and "best iteration" in out
    for name in ("model.pbm", "eras.png", "importance.png", "curve.png"):
        assert (tmp_path / name).stat().st_size > 0
