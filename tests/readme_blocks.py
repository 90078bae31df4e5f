"""The README's runnable blocks: what they run, what they print (tests/test_readme.py).

Two kinds of block follow a ``<!-- readme-output: ... -->`` comment:

* a ``console`` block: ``$ packboost ...`` commands (a trailing backslash
  continues one), each followed by what it prints on stdout (nothing shown:
  it is run, its output not compared);
* a ``python`` block followed by a ``text`` block: what the code prints.

Times (``0.9 s``) depend on the machine, so they are masked before outputs
are compared; ``benchmarks/readme_outputs.py`` writes the README's outputs
from a real run, with the date, commit and hardware of that run.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

_MARKER = "<!-- readme-output:"
_FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
_TIME = re.compile(r"\b\d+(?:\.\d+)? s\b")


@dataclass
class Command:
    argv: list          # the arguments after "packboost"
    text: str           # the command as the README shows it, continuation lines included
    output: str         # what the README shows it printing ("" when nothing is shown)


@dataclass
class PythonExample:
    code: str
    output: str


def mask_times(text: str) -> str:
    """``text`` with every duration (``0.9 s``, ``57.0 s``) replaced by ``<t> s``."""
    return _TIME.sub("<t> s", text)


def _blocks_after_markers(text: str) -> list:
    """``(language, body, start, end)`` of the fenced blocks after each marker."""
    found = []
    for marker in re.finditer(re.escape(_MARKER), text):
        fence = _FENCE.search(text, marker.end())
        found.append((fence.group(1), fence.group(2), fence.start(2), fence.end(2)))
        if fence.group(1) == "python":
            output = _FENCE.search(text, fence.end())
            found.append((output.group(1), output.group(2), output.start(2), output.end(2)))
    return found


def console_commands(body: str) -> list:
    """The commands of one console block, each with the output shown under it."""
    commands, lines = [], body.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"console block: output before any command: {line!r}")
        shown = [line]
        while shown[-1].endswith("\\"):
            index += 1
            shown.append(lines[index])
        index += 1
        output = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        command_text = " ".join(part.rstrip("\\").strip() for part in shown)[2:]
        argv = shlex.split(command_text)
        if argv[0] != "packboost":
            raise ValueError(f"console block: only packboost commands run here: {argv[0]!r}")
        commands.append(Command(argv[1:], "\n".join(shown),
                                "\n".join(output) + ("\n" if output else "")))
    return commands


def readme_examples(text: str | None = None) -> tuple:
    """``(console commands, python examples)`` of the README, in order."""
    text = README.read_text() if text is None else text
    blocks = _blocks_after_markers(text)
    commands, examples = [], []
    index = 0
    while index < len(blocks):
        language, body = blocks[index][:2]
        if language == "console":
            commands.extend(console_commands(body))
        elif language == "python":
            examples.append(PythonExample(body, blocks[index + 1][1]))
            index += 1
        else:
            raise ValueError(f"a readme-output marker before a {language!r} block")
        index += 1
    return commands, examples


def run_command(command: Command, cwd) -> str:
    """Run ``packboost ARGS`` as the README does (this interpreter's packboost); its stdout."""
    result = subprocess.run([sys.executable, "-m", "packboost", *command.argv], cwd=cwd,
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"packboost {' '.join(command.argv)} failed "
                             f"({result.returncode}):\n{result.stderr}")
    return result.stdout


def run_python(example: PythonExample, namespace: dict, where: str) -> str:
    """Execute ``example.code`` in ``namespace``; what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example.code, where, "exec"), namespace)
    return printed.getvalue()
