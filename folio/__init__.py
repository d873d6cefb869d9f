"""folio: section-scoped semantic search over a Markdown corpus.

The index holds references (path, line range, heading trail, frontmatter), never bodies.
"""

# The one place the version lives: pyproject.toml reads it from this text (setuptools' attr), and
# `folio --version` and `folio mcp` import it. A plain attribute: importlib.metadata would cost start-up.
__version__ = "0.1.0"
# The distribution's name on PyPI (`folio` there is another project): what install hints name.
DISTRIBUTION = "folio-sections"
