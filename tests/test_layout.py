"""Names that moved between modules stay importable where they used to be."""

import importlib
import subprocess
import sys

import pytest

MOVED = [
    # (old module, name, new module)
    ("packboost.metrics", "EraReport", "packboost.reports"),
    ("packboost.metrics", "era_report", "packboost.reports"),
    ("packboost.metrics", "EvalMetric", "packboost._eval_metrics"),
    ("packboost.metrics", "resolve_eval_metric", "packboost._eval_metrics"),
    ("packboost.metrics", "pooled_metric", "packboost._eval_metrics"),
    ("packboost.metrics", "EVAL_METRIC_NAMES", "packboost._eval_metrics"),
    ("packboost.metrics", "POOLED_METRICS", "packboost._eval_metrics"),
    ("packboost._inputs", "read_columns", "packboost._files"),
    ("packboost._inputs", "write_columns", "packboost._files"),
    ("packboost._inputs", "list_file_columns", "packboost._files"),
    ("packboost._inputs", "select_columns", "packboost._files"),
    ("packboost.sklearn", "_PARAMETER_RULES", "packboost._parameters"),
    ("packboost.sklearn", "MAX_PACK_SIZE", "packboost._parameters"),
    ("packboost.cli", "CommandError", "packboost.cli._common"),
    ("packboost.cli", "DEFAULT_ERA_COLUMN", "packboost.cli.columns"),
    ("packboost.cli", "DEFAULT_TARGET_COLUMN", "packboost.cli.columns"),
    ("packboost.cli", "DEFAULT_FEATURE_PATTERN", "packboost.cli.columns"),
    ("packboost.cli", "DEFAULT_ID_COLUMN", "packboost.cli.columns"),
    ("packboost.cli", "DEFAULT_PREDICTION_COLUMN", "packboost.cli.columns"),
    ("packboost.cli", "DEMO_HOLDOUT_FRACTION", "packboost.cli.demo"),
    ("packboost.cli", "CORRELATION_CHOICES", "packboost.cli.evaluate"),
]


@pytest.mark.parametrize("old, name, new", MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_moved_names_are_the_same_objects(old, name, new):
    old_value = getattr(importlib.import_module(old), name)
    new_name = name.lstrip("_").upper() if name == "_PARAMETER_RULES" else name
    assert old_value is getattr(importlib.import_module(new), new_name)


def test_public_all_still_resolves():
    for module in ("packboost", "packboost.metrics", "packboost.reports", "packboost.cli"):
        imported = importlib.import_module(module)
        for name in imported.__all__:
            assert getattr(imported, name) is not None, (module, name)


def test_unknown_names_still_raise_attribute_error():
    import packboost._inputs
    import packboost.metrics

    for module in (packboost.metrics, packboost._inputs):
        with pytest.raises(AttributeError):
            module.no_such_name  # noqa: B018


@pytest.mark.parametrize("module", ["packboost.model_io", "packboost.reports"])
def test_each_module_imports_first_in_a_fresh_interpreter(module, tmp_path):
    """No import cycle: any module may be the first one imported."""
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, cwd=tmp_path)
