"""Sphinx configuration of the PackBoost documentation site.

Build: ``python -m sphinx -W -b html docs docs/_build`` (``pip install ".[docs]"``).
Warnings are errors, so a broken cross-reference or a stale autodoc target
fails the build. The Markdown pages are read by myst-parser, the docstrings
by numpydoc, and the scripts of ``docs/examples/`` are run by sphinx-gallery.
"""

import os
import sys
from pathlib import Path

import packboost

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
# The gallery's examples draw with matplotlib without a display.
os.environ.setdefault("MPLBACKEND", "Agg")

project = "PackBoost"
author = "The PackBoost developers"
copyright = "2026, The PackBoost developers"
release = version = packboost.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "packboost_parameters",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples/README.txt", "sg_execution_times.rst"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

templates_path = ["_templates"]

sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
}

html_theme = "furo"
html_title = f"PackBoost {release}"


# scikit-learn adds methods to every estimator (``set_fit_request``, ``score``,
# ...) whose docstrings cite its own site: documented there, not here.
_SKLEARN_MEMBERS = {"get_metadata_routing", "get_params", "set_params", "score"}


def _skip_sklearn_members(app, what, name, obj, skip, options):
    if name in _SKLEARN_MEMBERS or (name.startswith("set_") and name.endswith("_request")):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_members)
