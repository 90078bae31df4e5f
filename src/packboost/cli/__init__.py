"""The ``packboost`` command line.

Subcommands:

``train DATA``
    Fit a model on a parquet or CSV file (era, target and feature columns
    chosen by name) and save it; parameters from flags or a TOML file;
    optional validation file with early stopping.
``predict MODEL DATA``
    Write the model's predictions for a file (id column kept) as CSV or parquet.
``evaluate DATA``
    Per-era report (Pearson, Spearman, Numerai correlation, optionally
    feature-neutral) of a model's predictions or of a prediction column, as
    a table, and optionally as CSV and PNG.
``demo``
    Train on built-in synthetic era data (:func:`packboost.datasets.make_numerai_like`),
    hold out the last quarter of eras and compare PackBoost with a
    least-squares linear baseline on held-out per-era correlation.

Run ``packboost --help`` or ``python -m packboost --help``. :func:`main`
returns the exit status: 0 on success, 2 on a usage error (argparse's
convention; also, before any work, an output path that names an input or
another output -- through any spelling or link -- or that cannot be
written), 1 when the run itself fails (a missing, unreadable or ambiguous
file or column, bad data, a corrupted model file, no usable GPU, too little
memory, a missing optional package), with the reason on stderr as one line
``packboost COMMAND: error: ...``, and 130 when interrupted (Ctrl-C). Any
other exception is a bug and keeps its traceback.

One module per command (:mod:`~packboost.cli.train`, ``predict``,
``evaluate``, ``demo``), each with ``add_parser`` and ``run``;
:mod:`~packboost.cli.columns` chooses a file's era, target and feature columns.
"""

from __future__ import annotations

import argparse
import os
import sys

from packboost.cli import demo, evaluate, predict, train

# CommandError and the constants, kept importable from packboost.cli.
from packboost.cli._common import CommandError  # noqa: F401
from packboost.cli.columns import (  # noqa: F401
    DEFAULT_ERA_COLUMN,
    DEFAULT_FEATURE_PATTERN,
    DEFAULT_ID_COLUMN,
    DEFAULT_PREDICTION_COLUMN,
    DEFAULT_TARGET_COLUMN,
)
from packboost.cli.demo import DEMO_HOLDOUT_FRACTION  # noqa: F401
from packboost.cli.evaluate import CORRELATION_CHOICES  # noqa: F401

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        Exit status: 0 on success, 2 on a usage error, 1 on a failed run.
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help (0) and usage errors (2)
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr)
        return 1
    try:
        # The command's own parser: its usage errors read "packboost COMMAND: error: ...".
        return int(args.command_function(args, args.command_parser))
    except BrokenPipeError:  # e.g. "packboost evaluate ... | head": stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except SystemExit as exc:  # parser.error inside a command
        return int(exc.code or 0) if exc.code is None or isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        # Ctrl-C: nothing half-written is left (models and outputs are written
        # atomically, once complete); 130 = 128 + SIGINT, as shells report it.
        print(f"packboost {args.command}: interrupted", file=sys.stderr)
        return 130
    except _expected_errors() as error:
        print(f"packboost {args.command}: error: {_message(error)}", file=sys.stderr)
        return 1


def _expected_errors() -> tuple:
    """What a run may fail with on bad input, files, GPU or memory: printed as one
    line (``packboost COMMAND: error: ...``), exit status 1. Anything else is a
    bug and keeps its traceback."""
    from packboost._device import CudaError
    from packboost._files import _library_errors
    from packboost.model_file import ModelFileError

    return (CommandError, ValueError, TypeError, OSError, ImportError, KeyError,
            MemoryError, ArithmeticError, ModelFileError, CudaError,
            *_library_errors())


def _message(error) -> str:
    if isinstance(error, KeyError) and error.args:
        text = str(error.args[0])
    else:
        text = str(error)
    text = " ".join(line.strip() for line in text.splitlines() if line.strip())
    if not text:
        text = "out of memory" if isinstance(error, MemoryError) else type(error).__name__
    return text


def _build_parser() -> argparse.ArgumentParser:
    from packboost._version import __version__

    parser = argparse.ArgumentParser(
        prog="packboost",
        description="PackBoost: gradient-boosted trees for era-structured data.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    commands.required = True
    for command in (train, predict, evaluate, demo):
        command.add_parser(commands)
    return parser
