"""Optional dependencies, imported once and named when missing.

scikit-learn is optional: without it the estimators still fit and predict
(with a minimal get_params/set_params), they just are not sklearn subclasses.
"""

from __future__ import annotations

import importlib

try:  # pragma: no cover - exercised in environments without scikit-learn
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

    SKLEARN_INSTALLED = True
except ImportError:  # pragma: no cover
    SKLEARN_INSTALLED = False

    class BaseEstimator:  # type: ignore[no-redef]
        """Stand-in offering scikit-learn's parameter protocol."""

        @classmethod
        def _get_param_names(cls):
            import inspect

            signature = inspect.signature(cls.__init__)
            return sorted(name for name, parameter in signature.parameters.items()
                          if name != "self" and parameter.kind == parameter.KEYWORD_ONLY
                          or name != "self" and parameter.kind == parameter.POSITIONAL_OR_KEYWORD)

        def get_params(self, deep=True):
            return {name: getattr(self, name) for name in self._get_param_names()}

        def set_params(self, **params):
            valid = self._get_param_names()
            for name, value in params.items():
                if name not in valid:
                    raise ValueError(f"Invalid parameter {name!r} for {type(self).__name__}")
                setattr(self, name, value)
            return self

    class RegressorMixin:  # type: ignore[no-redef]
        _estimator_type = "regressor"

    class ClassifierMixin:  # type: ignore[no-redef]
        _estimator_type = "classifier"


def import_optional(module: str, purpose: str):
    """Import ``module`` or raise ImportError saying which package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = module.split(".")[0]
        raise ImportError(
            f"{purpose} needs the optional package {package!r}: pip install {package}"
        ) from error
