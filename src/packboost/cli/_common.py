"""What every command shares: the failed-run exception and argument types."""

from __future__ import annotations

import argparse
import os

import numpy as np


class CommandError(Exception):
    """A failed run: the message is printed and the exit status is 1."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def _same_file(first, second) -> bool:
    """Whether two paths name one file: the same inode when both exist (hard
    and symbolic links, any spelling), else the same resolved path."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return os.path.realpath(first) == os.path.realpath(second)


def check_paths(parser, *, inputs, outputs) -> None:
    """Refuse, as a usage error and before any work, outputs that would
    replace an input or another output, or that cannot be written.

    ``inputs`` and ``outputs`` are ``(option, path)`` pairs (``path`` None
    when the option was not given). Exits with status 2 via ``parser.error``.
    """
    inputs = [(option, os.fspath(path)) for option, path in inputs if path is not None]
    outputs = [(option, os.fspath(path)) for option, path in outputs if path is not None]
    for index, (option, path) in enumerate(outputs):
        if not path.strip():
            parser.error(f"{option}: empty path")
        for input_option, input_path in inputs:
            if _same_file(path, input_path):
                parser.error(f"{option} {path!r} is the input {input_option} "
                             f"{input_path!r}: writing it would replace the input; "
                             "choose another output path")
        for other_option, other_path in outputs[:index]:
            if _same_file(path, other_path):
                parser.error(f"{option} {path!r} and {other_option} {other_path!r} are "
                             "the same file: one output would replace the other")
        if os.path.isdir(path):
            parser.error(f"{option} {path!r} is a directory; give a file name")
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            parser.error(f"{option} {path!r}: no directory {directory!r}")
        if not os.access(directory, os.W_OK | os.X_OK):
            parser.error(f"{option} {path!r}: directory {directory!r} is not writable")


def check_table_output(parser, option, path) -> None:
    """A predictions or report file must be .csv(.gz), .tsv or .parquet."""
    from packboost import _files

    if path is None:
        return
    try:
        _files._suffix(path)
    except ValueError:
        parser.error(f"{option} {path!r}: expected a .csv or .parquet file name")


def check_image_output(parser, option, path) -> None:
    """A chart path needs matplotlib and a format it writes (by the suffix)."""
    if path is None:
        return
    from packboost._compat import import_optional

    figure = import_optional("matplotlib.figure", f"{option} (saving a chart)")
    suffix = os.path.splitext(path)[1].lower().lstrip(".")
    formats = figure.Figure().canvas.get_supported_filetypes()
    if suffix not in formats:
        parser.error(f"{option} {path!r}: expected an image file name ending in one of "
                     f"{', '.join('.' + name for name in sorted(formats))}")


def save_figure(save, path) -> None:
    """``save(temporary_path)`` then rename onto ``path``: a chart is never half-written."""
    from packboost import _files

    with _files.atomic_path(path) as temporary:
        save(str(temporary))
