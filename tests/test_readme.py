"""The README and the user guide say what the code does: every command runs and prints
what they show (times aside), every Python example runs as written."""

import re

import pytest
from readme_blocks import (
    README,
    ROOT,
    mask_times,
    readme_examples,
    run_command,
    run_python,
)

GUIDE = ROOT / "docs" / "guide"


def test_the_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    commands, examples = readme_examples(text)
    assert [command.argv[0] for command in commands] == ["demo", "demo", "train", "predict"]
    assert len(examples) == 1 and "make_numerai_like" in examples[0].code
    # Every relative link leads to a file of the tree.
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)\)", text):
        assert (README.parent / target).exists(), target


def test_the_readme_timings_are_stamped():
    """Machine-dependent figures come from benchmarks/readme_outputs.py, which
    stamps them with the date, the commit and the hardware."""
    text = README.read_text()
    block = re.search(r"<!-- readme-timings: begin.*?-->\n(.*?)<!-- readme-timings: end -->",
                      text, re.S)
    assert block, "the timings block is missing"
    stamp = block.group(1)
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", stamp), stamp
    assert re.search(r"commit `[0-9a-f]{7,}`", stamp), stamp
    assert "cores" in stamp and "`packboost demo`" in stamp and "`pytest`" in stamp


def test_readme_commands_print_what_it_shows(tmp_path):
    pytest.importorskip("pyarrow")      # the parquet files of the Numerai day
    pytest.importorskip("lightgbm")     # packboost demo's comparison
    commands, _ = readme_examples()
    for command in commands:
        printed = run_command(command, tmp_path)
        if command.output:
            assert mask_times(printed) == mask_times(command.output), command.text
    assert (tmp_path / "model.pbm").stat().st_size > 0
    assert (tmp_path / "predictions.csv").read_text().startswith("id,prediction\n")


def _readme_namespace(tmp_path, monkeypatch) -> dict:
    """The README's Python example run in ``tmp_path``; its printed output checked."""
    monkeypatch.chdir(tmp_path)  # the examples write model files and PNG files
    _, examples = readme_examples()
    namespace = {"__name__": "readme"}
    for index, example in enumerate(examples):
        printed = run_python(example, namespace, f"README.md python block {index}")
        assert printed == example.output
    return namespace


def test_readme_python_prints_what_it_shows(tmp_path, monkeypatch):
    namespace = _readme_namespace(tmp_path, monkeypatch)
    assert namespace["model"].best_iteration_ == 25
    assert (tmp_path / "model.pbm").stat().st_size > 0


def _guide_pages() -> list:
    """The user guide's pages in the order of its table of contents."""
    index = (GUIDE / "index.md").read_text()
    toctree = re.search(r"```\{toctree\}\n(.*?)```", index, re.S).group(1)
    names = [line.strip() for line in toctree.splitlines()
             if line.strip() and not line.startswith(":")]
    return [GUIDE / f"{name}.md" for name in names]


@pytest.mark.skipif(not GUIDE.is_dir(), reason="docs/ is not at hand (an installed copy)")
def test_the_user_guide_examples_run(tmp_path, monkeypatch):
    """Each page's Python blocks, in the guide's order, after the README's example
    (the pages start from its ``train``, ``valid`` and ``model``)."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    namespace = _readme_namespace(tmp_path, monkeypatch)
    # The guide starts from Getting started's fit, which is the README's.
    started = re.findall(r"```python\n(.*?)```", (GUIDE.parent / "getting-started.md").read_text(),
                         re.S)
    assert started == [readme_examples()[1][0].code]
    ran = 0
    for page in _guide_pages():
        text = page.read_text()
        if "```bash" in text:
            continue   # a page of its own data and commands: tests/test_guide.py runs it
        blocks = re.findall(r"```python\n(.*?)```", text, re.S)
        for index, block in enumerate(blocks):
            where = f"{page.relative_to(ROOT)} python block {index}"
            exec(compile(block, where, "exec"), namespace)
            ran += 1
    assert ran >= 12
    for name in ("eras.png", "importance.png", "curve.png", "robust.pbm"):
        assert (tmp_path / name).stat().st_size > 0
