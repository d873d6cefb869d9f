"""Lexical analysis: how a text becomes terms, the same at index time and at query time.

Owns the documents' fields (FIELDS, Doc), the tokens, case folding, stopwords and stemming, the
term hash, the path field's words, and the index-time tokeniser over bytes (raw_tokens, raw_terms,
count_terms), which must give exactly ``analyze``'s terms. No numpy, no file I/O, no printing: the
segments (segments.py) and the scorer (scoring.py) take terms and hashes from here. A change here
changes every index: the stored segments hold these terms' hashes, so an index built under other
rules must be analysed again (ANALYSIS_VERSION, below).

Analyzer (``analyze``; the same function at index and query time)
-----------------------------------------------------------------
* A text is cut into raw tokens at every ASCII character that is neither a letter, a digit nor an
  identifier joiner (``_ - . < >`` inside a name, ``/ : = ^`` between names); bytes >= 0x80 stay
  in the token. Joiners at either end are trimmed (a closing ``>`` that balances a ``<`` stays:
  ``Rc<T>``), so ``end.``, ``--flag`` and ``<div>`` are plain words.
* Words: each raw token's Unicode words without underscores, regex ``[^\\W_]+`` -- letters and
  digits of any script ("Straße", "日本", "ch03", "42"); ``snake_case`` splits at ``_``,
  ``memory.swap.max`` at the dots.
* Each word is ``str.casefold()``-ed ("Straße" -> "strasse"), ``STOPWORDS`` (a small English
  list) are dropped and the stemmer below applies.
* camelCase and CamelCase words keep their whole term and add their parts' terms
  (``getUserName`` -> ``getusernam`` get user name; ``HTTPServer`` -> ``httpserver`` http server).
* Identifiers are also terms as a whole, case-folded and unstemmed (ANALYSIS_VERSION 2): every
  name of a raw token that holds a joiner (``hash_opcode_gas``, ``eip-4844``, ``memory.swap.max``,
  ``v1.2.3``, ``rc<t>``), and the whole raw token when it joins names (``rc::strong_count``,
  ``eth/68``, ``fail-swap-on=false``). So ``HASH_OPCODE_GAS`` matches its three parts, as common
  words, and the rare whole, which only the sections that spell it hold.
* A light English stemmer (``stem``) applies to pure-ASCII alphabetic tokens of
  length >= 3; digits and other scripts are left as they are. Rules in order:

  1. inflection: ``-sses -> -ss``; ``-ies -> -y`` (len > 4); ``-s`` dropped
     unless ``-ss/-us/-is``; ``-ing``/``-ed`` dropped when >= 2 letters with a
     vowel remain, then a doubled final consonant (not l/s/z) is undoubled
     (running -> run); ``-ly`` dropped when >= 4 letters remain.
  2. derivation (up to two passes, longest suffix first, >= 4 letters must
     remain): -ization -isation -ation -ition -ement -ment -ence -ance -ency
     -ancy -ness -able -ible -ive -ity -ize -ise -ent -ant -iz -is.
  3. a final ``e`` is dropped (not after ``e``, >= 2 letters remain).
  4. a final ``y`` after a consonant becomes ``i`` (apply/applies/applied).

  So independent/independence/independently -> ``independ``;
  recognise/recognised/recognize/recognition -> ``recogn``; run/runs/running
  -> ``run``; configure/configured/configuration -> ``configur``.

A term's hash is ``blake2b(term.encode("utf-8"), digest_size=8)`` read as a
little-endian uint64 (``term_hash``).

Index-time tokenisation gives exactly ``analyze``'s terms but runs per field column:
the texts are UTF-8 encoded and joined by a sentinel byte (SENTINEL, 0xFF, never in UTF-8),
the separators are translated to spaces and the blob is ``bytes.split()`` (``raw_tokens``);
each distinct raw token is analysed once (cached: ``raw_terms``) by the same rules.
``analyze`` cuts its text the same way.

Path field: ``tokenize_path`` drops a trailing file extension and cuts the rest into raw tokens:
``docs/ch03-01-variables.md`` -> ``docs/ch03-01-variables`` (words docs ch03 01 variables, the
names ``ch03-01-variables`` and the whole).

ANALYSIS_VERSION names these rules. The index records the version its lexical segments were built
under (meta ``analysis``); `folio index` over an index of another version reads every file again to
rebuild the lexical plane (vectors kept: the records do not change).
"""

from __future__ import annotations

import re
from collections import namedtuple
from hashlib import blake2b
from typing import NamedTuple

from folio.lexical import ANALYSIS_VERSION  # noqa: F401 - these rules' version (defined where a no-op run reads it)

FIELDS = ("body", "heading", "title", "path", "context")

# One record as the lexical plane reads it: its slot and the text of each field (FIELDS order).
Doc = namedtuple("Doc", "slot body heading title path context")


def record_doc(slot: int, s, title: str, path: str, lines: list[str] | None = None) -> Doc:
    """The lexical document of record `s` (sections.Section) of the file at `path`: its text (a record
    cut to the budget, `truncated`, is searched by its whole lines: `lines`, the file's text split at
    newlines), its heading, the file's title and path, and the headings above it."""
    body = "\n".join(lines[s.start - 1:s.end]) if s.truncated and lines is not None else s.text
    return Doc(slot, body, s.heading, title, path, " ".join(s.trail[:-1]))

STOPWORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "s",
        "so",
        "t",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    )  # fmt: skip
)

_WORD_RE = re.compile(r"[^\W_]+")
# Identifier joiners (module docstring): inside one name, and between names.
_JOIN0 = "_-.<>"
_JOIN1 = "/:=^"
_JOINERS = _JOIN0 + _JOIN1
_NO_JOINERS = str.maketrans("", "", _JOINERS)
_NO_JOIN0 = str.maketrans("", "", _JOIN0)
_JOIN1_RE = re.compile(r"[/:=^]+")
_NAME_RE = re.compile(r"[\w.<>-]+")
_CAMEL_RE = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_CAMEL_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_EXT_RE = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_VOWELS = frozenset("aeiouy")

_STEP2 = (
    "ization", "isation", "ation", "ition", "ement", "ment", "ence", "ance",
    "ency", "ancy", "ness", "able", "ible", "ive", "ity", "ize", "ise",
    "ent", "ant", "iz", "is",
)  # fmt: skip


# --------------------------------------------------------------------------- analyzer


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s)


def stem(word: str) -> str:
    """Light English stemmer for a case-folded word (see module docstring)."""
    if len(word) < 3 or not (word.isascii() and word.isalpha() and word.islower()):
        return word
    w = word
    # 1. inflection
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    for suf in ("ing", "ed"):
        if w.endswith(suf):
            rest = w[: -len(suf)]
            if len(rest) >= 2 and _has_vowel(rest):
                w = rest
                if len(w) >= 3 and w[-1] == w[-2] and w[-1] not in "lsz" + "aeiou":
                    w = w[:-1]
            break
    if w.endswith("ly") and len(w) - 2 >= 4:
        w = w[:-2]
    # 2. derivation
    for _ in range(2):
        if not w.endswith(_STEP2):
            break
        for suf in _STEP2:
            if w.endswith(suf) and len(w) - len(suf) >= 4:
                w = w[: -len(suf)]
                break
        else:
            break
    # 3. final e
    if w.endswith("e") and len(w) >= 3 and w[-2] != "e":
        w = w[:-1]
    # 4. consonant + y -> i
    if w.endswith("y") and len(w) >= 3 and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    return w


def _term_of_word(word: str) -> str | None:
    """Analysed term for one raw token, or None for a stopword."""
    f = word.casefold()
    if f in STOPWORDS:
        return None
    return stem(f)


def term_hash(term: str) -> int:
    """Stable 64-bit id of an analysed term."""
    return int.from_bytes(blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


def analyze(text: str) -> list[str]:
    """Analysed terms of ``text`` in order (duplicates kept, stopwords dropped)."""
    out: list[str] = []
    for raw in text.encode("utf-8", "surrogatepass").translate(_SEP_TABLE).split():
        out += token_terms(raw.decode("utf-8", "surrogatepass"))
    return out


def token_terms(tok: str) -> list[str]:
    """The terms of one raw token: its words' terms (and camelCase parts), then its names whole."""
    tok = _trim(tok)
    out = []
    for w in _WORD_RE.findall(tok):
        t = _term_of_word(w)
        if t is not None:
            out.append(t)
        if _CAMEL_RE.search(w):
            out += [p for p in map(_term_of_word, _CAMEL_PART_RE.findall(w)) if p is not None]
    return out + names(tok) if tok.translate(_NO_JOINERS) != tok else out


def names(tok: str) -> list[str]:
    """The identifiers a trimmed raw token holds as a whole (module docstring), case-folded."""
    out = []
    units = [u for u in map(_trim, _JOIN1_RE.split(tok)) if u]
    for u in units:
        if u.translate(_NO_JOIN0) != u and _is_name(u):
            out.append(u.casefold())
    if len(units) > 1 and all(_is_name(u) for u in units):
        out.append(tok.casefold())
    return out


def identifier_share(text: str) -> float:
    """The share of a question's raw tokens (those that give a term) that are identifiers: a name
    with joiners or a camelCase word. 0.0 for a question in plain words."""
    n = ids = 0
    for raw in text.encode("utf-8", "surrogatepass").translate(_SEP_TABLE).split():
        tok = _trim(raw.decode("utf-8", "surrogatepass"))
        words = _WORD_RE.findall(tok)
        if not any(_term_of_word(w) is not None for w in words):
            continue
        n += 1
        ids += bool(names(tok) or any(_CAMEL_RE.search(w) for w in words))
    return ids / n if n else 0.0


def _trim(tok: str) -> str:
    """A raw token without joiners at its ends; a closing '>' that balances a '<' stays (Rc<T>)."""
    t = tok.lstrip(_JOINERS)
    while t and t[-1] in _JOINERS:
        if t[-1] == ">" and t.count("<") >= t.count(">"):
            break
        t = t[:-1]
    return t


def _is_name(u: str) -> bool:
    """Letters, digits and name joiners only, angle brackets balanced (Vec<Vec<u8>>)."""
    if not _NAME_RE.fullmatch(u):
        return False
    depth = 0
    for c in u:
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


class Query(NamedTuple):
    """A question analysed once, for every use a query makes of it: its terms (analyze: BM25F), its
    distinct terms with their spelling (query_terms: the confidence block) and its identifier share
    (identifier_share: the fusion weights, the reanalysis notice)."""
    text: str
    terms: list
    distinct: list
    share: float


def query(text: str) -> Query:
    return Query(text, analyze(text), query_terms(text), identifier_share(text))


def query_terms(text: str) -> list[tuple[str, str]]:
    """(surface spelling, analysed term) per distinct term, in order; stopwords dropped."""
    seen: set[str] = set()
    out = []
    for w in _WORD_RE.findall(text):
        t = _term_of_word(w)
        if t is None or t in seen:
            continue
        seen.add(t)
        out.append((w, t))
    return out


def tokenize_path(path: str) -> list[str]:
    """The path field's raw tokens, without the extension: 'docs/ch03-01-variables.md' ->
    ['docs/ch03-01-variables'] (``analyze`` of them gives the field's terms)."""
    return [t.decode("utf-8", "surrogatepass") for t in
            strip_extension(path).encode("utf-8", "surrogatepass").translate(_SEP_TABLE).split()]



def strip_extension(path: str) -> str:
    """A path without its trailing file extension (the path field's text, before tokenising)."""
    return _EXT_RE.sub("", path, count=1)


# --------------------------------------------------------------------------- index-time tokens


# ASCII bytes that can never be part of a word or an identifier become spaces; bytes >= 0x80 are
# kept, so a raw token is a run of ASCII alphanumerics, joiners and non-ASCII characters. Every raw
# token is then analysed by token_terms (once per distinct token, cached): the result equals
# ``analyze``'s, at the speed of bytes.translate + bytes.split.
_SEP_TABLE = bytes(
    c if (48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c >= 128 or chr(c) in _JOINERS) else 32
    for c in range(256)
)
_RAW_CACHE: dict[bytes, tuple[int, ...]] = {}
_RAW_CACHE_MAX = 2_000_000


def raw_terms(raw: bytes) -> tuple[int, ...]:
    """Term hashes of one raw token (usually one; none for stopwords)."""
    hs = _RAW_CACHE.get(raw)
    if hs is None:
        hs = _raw_terms_uncached(raw)
        if len(_RAW_CACHE) >= _RAW_CACHE_MAX:
            _RAW_CACHE.clear()
        _RAW_CACHE[raw] = hs
    return hs


def _raw_terms_uncached(raw: bytes) -> tuple[int, ...]:
    if raw.isalnum():  # ASCII letters and digits: one word, the common case
        w = raw.decode("ascii")
        if not _CAMEL_RE.search(w):
            t = _term_of_word(w)
            return () if t is None else (term_hash(t),)
    return tuple(term_hash(t) for t in token_terms(raw.decode("utf-8", "surrogatepass")))


SENTINEL = b"\xff"  # never occurs in UTF-8: separates texts inside one bytes blob
_CHUNK = 1 << 20  # bytes of one text counted at a time (count_terms)


def raw_tokens(blob: bytes) -> list[bytes]:
    """The raw tokens of a UTF-8 blob (runs of ASCII alphanumerics and non-ASCII bytes), in order;
    a SENTINEL between texts comes out as a token of its own."""
    return blob.translate(_SEP_TABLE).split()


def count_terms(text: str) -> dict[int, int]:
    """{term hash: count} of one text, read in chunks cut at separator bytes, so memory follows the
    distinct tokens of a chunk and the distinct terms, not the text's length."""
    from collections import Counter

    data = text.encode("utf-8", "surrogatepass")
    counts: Counter = Counter()
    cache: dict[bytes, tuple[int, ...]] = {}  # its own, bounded: a text of distinct tokens must not fill
    pos, n = 0, len(data)                     # the shared cache (two million entries) for one record
    while pos < n:
        end = min(pos + _CHUNK, n)
        while end < n and _SEP_TABLE[data[end]] != 32:  # never cut inside a token (or a character)
            end += 1
        for raw, k in Counter(data[pos:end].translate(_SEP_TABLE).split()).items():
            hs = cache.get(raw)
            if hs is None:
                if len(cache) >= 250_000:
                    cache.clear()
                hs = cache[raw] = _raw_terms_uncached(raw)
            for h in hs:
                counts[h] += k
        pos = end
    return counts
