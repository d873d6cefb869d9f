"""folio: section-scoped semantic search over a Markdown corpus.

The index holds references (path, line range, heading trail, frontmatter), never bodies.
"""

__version__ = "0.1.0"
