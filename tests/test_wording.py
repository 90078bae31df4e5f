"""The project speaks of the project: no development history in what users read.

README.md, docs/ and src/ date results by date and commit and name machines by
their hardware; how the work was organised (sessions, who lent which
machine) has no place there (benchmarks/RESULTS.md keeps the history).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(r"session|lent (intel|machine)", re.I)
TEXT_SUFFIXES = {".md", ".py", ".pyx", ".pxd", ".h", ".c", ".cu", ".cuh", ".in", ".txt",
                 ".rst", ".toml", ".build"}


def _files():
    yield ROOT / "README.md"
    for top in ("docs", "src"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "_build" not in path.parts \
                    and "generated" not in path.parts and "auto_examples" not in path.parts:
                yield path


@pytest.mark.skipif(not (ROOT / "src").is_dir(), reason="not a source tree")
def test_no_development_history_wording():
    found = []
    for path in _files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "development-history wording:\n" + "\n".join(found)
