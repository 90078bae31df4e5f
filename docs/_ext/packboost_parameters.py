"""``.. packboost-parameters::``: the estimators' parameters as one table, from the schema.

Every parameter is declared once, in :data:`packboost._parameters.SCHEMA`
(kind, bounds or choices, default, documentation); this directive renders
that declaration, so a parameter added there appears on the site without
another edit. The estimators' docstrings are generated from the same schema.
"""

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList


class ParametersDirective(Directive):
    has_content = False

    def run(self):
        from packboost import _parameters

        # The page is Markdown (myst-parser parses what a directive nests), so
        # the table is a Markdown table; the schema's ``code`` reads the same.
        lines = ["| parameter | default | values | meaning |", "| --- | --- | --- | --- |"]
        for parameter in _parameters.SCHEMA:
            cells = [f"``{parameter.name}``", f"``{_parameters._default_doc(parameter)}``",
                     _values(parameter), " ".join(parameter.doc.split())]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="packboost._parameters.SCHEMA"),
                                self.content_offset, container)
        return container.children


def _values(parameter) -> str:
    """The parameter's type, and its interval when it has bounds."""
    from packboost import _parameters

    kind = f"``{_parameters._type_doc(parameter)}``"
    if parameter.low is None and parameter.high is None:
        return kind
    left = "[" if parameter.low_closed else "("
    right = "]" if parameter.high_closed and parameter.high is not None else ")"
    low = "-inf" if parameter.low is None else parameter.low
    high = "inf" if parameter.high is None else parameter.high
    return f"{kind} in ``{left}{low}, {high}{right}``"


def setup(app):
    app.add_directive("packboost-parameters", ParametersDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
