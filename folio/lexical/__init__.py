"""The lexical plane: BM25F over five fields, always built beside the vectors.

  analysis.py  how a text becomes terms, the same at index and query time: fields and documents
               (FIELDS, Doc), tokens, case folding, stopwords, stemming, term hashes, the path
               field, and the index-time tokeniser over bytes (no numpy)
  segments.py  the segment layout, building a segment from a batch's documents, merging segments
  scoring.py   BM25F over the live documents (Collection, score), and the confidence block

Where a segment lives on disk is folio/store/segments.py's business. Importing this package loads
nothing: each name below resolves to its module on first use (`lexical.score` is scoring.score),
and numpy comes with segments and scoring only.
"""

from __future__ import annotations

import importlib

# The version of analysis.py's rules, recorded in the index (reanalyse.py): here, so a run that
# analyses nothing (a no-op re-index) compares it without loading them (typing, hashlib: ~7 ms).
ANALYSIS_VERSION = "2"  # 1: words only; 2: identifiers as a whole and camelCase parts

_NAMES = (
    ("analysis", "FIELDS Doc STOPWORDS stem term_hash analyze query_terms tokenize_path"),
    ("segments", "SEGMENT_VERSION build_segment merge_segments alive_masks MERGE_CHUNK"),
    ("scoring", "WEIGHTS K1 B Collection score confidence DEFAULT_SEPARATION_FLOOR DEFAULT_DOC_COVERAGE_FLOOR "
                "SEMANTIC_SEPARATION_FLOOR"),
    ("analysis", "_RAW_CACHE"),  # the raw-token cache: a benchmark or test clears it to time a cold build
)
_HOME = {name: module for module, names in _NAMES for name in names.split()}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
