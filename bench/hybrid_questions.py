"""Draw the labelled known-item questions for bench/hybrid.py (written before any ranking run).

Each question is drawn from one sentence of one section, so its answer (that section) is known by
construction, and is stripped of every word its target's heading trail, document title or path
shares (headings and paths are BM25F fields that favour lexical ranking). The procedure is
deterministic for a seed and the corpus tarballs in ../shared/corpora/:

1. Files: every .md file of rust-book and eips; every third .md file of keps in sorted path order
   (keps is 22 MB of text: the whole of it takes too long to embed on 2 cores; bench/hybrid.py
   indexes exactly the same files, see `corpus_files`).
2. Sections: folio's own sectioner (`folio.sections.split_sections`), undivided; only headed
   sections (level >= 1). The target is (path, start line, end line, heading trail).
3. Sentences: prose lines of the section body only: not the heading line, not inside fenced code,
   HTML comments or HTML blocks, not tables, indented code, link definitions or images. A
   paragraph's lines are joined, links become their text, emphasis and backticks go, and the
   paragraph is split after . ! ? followed by a capital. Kept: 12-45 words, no URL.
4. Unique by construction: a sentence (lower-cased words) found in any other section of the same
   corpus (all of its files, not only the sampled third) is dropped: template text such as EIPs'
   copyright line or KEPs' checklist prose cannot have one answer.
5. Heading words out: every word whose folio analysed term (casefold, stopwords, the same light
   stemmer as the lexical plane) is a term of the target's trail, its document's title or its path
   is removed.
6. Paraphrase: every word found in SYNONYMS (a fixed table of ordinary English substitutions,
   written once, not tuned) is replaced.
7. Shortened to a query: a window of at most 12 words, starting at a seeded offset. A question must
   keep at least 5 words of which at least 4 are not stopwords, else the next candidate is tried.
8. Sampling: files shuffled with random.Random(seed); per file one section and one sentence chosen
   at random among the candidates; at most one question per file; PER_CORPUS questions per corpus.

Usage: python bench/hybrid_questions.py [--seed N] [--per-corpus N] > bench/hybrid_questions.yaml
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import corpora  # noqa: E402

from folio import lexical, sections  # noqa: E402

SEED = 20261130
PER_CORPUS = 40
CORPORA = ("rust-book", "eips", "keps")
MIN_WORDS, MAX_WORDS, WINDOW = 12, 45, 12

# Ordinary English substitutions (one direction only). Written once before any ranking run.
SYNONYMS = {
    "use": "employ", "uses": "employs", "used": "employed", "using": "employing",
    "create": "make", "creates": "makes", "created": "made", "creating": "making",
    "value": "quantity", "values": "quantities",
    "function": "routine", "functions": "routines",
    "method": "procedure", "methods": "procedures",
    "error": "failure", "errors": "failures",
    "file": "document", "files": "documents",
    "change": "modification", "changes": "modifications", "changed": "modified", "changing": "modifying",
    "new": "fresh",
    "allow": "permit", "allows": "permits", "allowed": "permitted", "allowing": "permitting",
    "need": "require", "needs": "requires", "needed": "required",
    "show": "display", "shows": "displays", "shown": "displayed",
    "return": "give back", "returns": "gives back", "returned": "given back",
    "call": "invoke", "calls": "invokes", "called": "invoked",
    "type": "kind", "types": "kinds",
    "example": "illustration", "examples": "illustrations",
    "data": "information",
    "run": "execute", "runs": "executes", "running": "executing",
    "check": "verify", "checks": "verifies", "checked": "verified", "checking": "verifying",
    "start": "begin", "starts": "begins", "started": "begun",
    "end": "finish", "ends": "finishes",
    "large": "big", "small": "little", "many": "numerous", "several": "a few",
    "important": "significant", "current": "present", "currently": "presently",
    "user": "person", "users": "people",
    "block": "chunk", "blocks": "chunks",
    "problem": "issue", "problems": "issues",
    "simple": "plain", "easy": "straightforward", "difficult": "hard",
    "different": "distinct", "same": "identical", "similar": "alike",
    "make": "produce", "makes": "produces", "made": "produced",
    "get": "obtain", "gets": "obtains",
    "add": "append", "adds": "appends", "added": "appended", "adding": "appending",
    "remove": "delete", "removes": "deletes", "removed": "deleted", "removing": "deleting",
    "ensure": "guarantee", "ensures": "guarantees",
    "provide": "supply", "provides": "supplies", "provided": "supplied",
    "require": "demand", "requires": "demands", "required": "mandatory",
    "specify": "state", "specifies": "states", "specified": "stated",
    "implement": "build", "implementation": "build-out", "implementations": "build-outs",
    "implemented": "built",
    "support": "handling", "supported": "handled", "supports": "handles",
    "feature": "capability", "features": "capabilities",
    "behavior": "conduct", "behaviour": "conduct",
    "also": "as well", "however": "but", "because": "since", "therefore": "so",
    "before": "prior to", "after": "following", "within": "inside",
    "number": "count", "numbers": "counts",
    "write": "author", "writes": "authors", "written": "authored", "writing": "authoring",
    "read": "load", "reads": "loads", "reading": "loading",
    "code": "source", "program": "application", "programs": "applications",
    "variable": "binding", "variables": "bindings",
    "list": "sequence", "lists": "sequences",
    "time": "moment", "way": "manner", "ways": "manners",
    "want": "wish", "wants": "wishes",
    "work": "operate", "works": "operates", "working": "operating",
    "useful": "handy", "possible": "feasible", "likely": "probable",
    "fail": "break", "fails": "breaks", "failed": "broke",
    "cluster": "fleet", "clusters": "fleets",
    "node": "machine", "nodes": "machines",
    "transaction": "transfer", "transactions": "transfers",
    "contract": "on-chain program", "contracts": "on-chain programs",
    "address": "account identifier", "addresses": "account identifiers",
    "proposal": "suggestion", "proposals": "suggestions",
    "field": "attribute", "fields": "attributes",
    "option": "choice", "options": "choices",
    "part": "portion", "parts": "portions",
    "enable": "switch on", "enabled": "switched on", "disable": "switch off", "disabled": "switched off",
}

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_REFLINK = re.compile(r"\[([^\]]*)\]\[[^\]]*\]")
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(])")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def corpus_files(name: str, root: Path) -> list[Path]:
    """The files the bench indexes and draws from: keps every third in sorted order, else all."""
    files = corpora.markdown_files(root)
    return files[::3] if name == "keps" else files


def prose_sentences(text: str) -> list[str]:
    """Sentences of a section's prose (its heading line excluded), cleaned of Markdown markup."""
    lines = text.split("\n")[1:]
    paras: list[list[str]] = [[]]
    fence = None
    comment = False
    for raw in lines:
        line = raw.rstrip()
        s = line.strip()
        if fence:
            if s.startswith(fence):
                fence = None
            continue
        if s.startswith("```") or s.startswith("~~~"):
            fence = s[:3]
            paras.append([])
            continue
        if comment:
            if "-->" in s:
                comment = False
            continue
        if s.startswith("<!--"):
            comment = "-->" not in s
            paras.append([])
            continue
        if (not s or s.startswith(("|", "<", "[", "![", "#", ">", "---", "===")) or raw.startswith("    ")
                or raw.startswith("\t")):
            paras.append([])
            continue
        if _LIST.match(line):
            paras.append([])
            s = _LIST.sub("", line).strip()
        paras[-1].append(s)
    out = []
    for p in paras:
        if not p:
            continue
        text = " ".join(p)
        text = _LINK.sub(r"\1", text)
        text = _REFLINK.sub(r"\1", text)
        text = text.replace("`", "").replace("**", "").replace("__", "").replace("*", "")
        for sent in _SENT_END.split(text):
            sent = sent.strip()
            n = len(_WORD.findall(sent))
            if MIN_WORDS <= n <= MAX_WORDS and "http" not in sent and "](" not in sent:
                out.append(sent)
    return out


def key(sentence: str) -> str:
    return " ".join(w.lower() for w in _WORD.findall(sentence))


def question(sentence: str, banned: set[str], rng: random.Random) -> str | None:
    words = [w for w in _WORD.findall(sentence) if not (set(lexical.analyze(w)) & banned)]
    words = [SYNONYMS.get(w.lower(), w) for w in words]
    words = " ".join(words).split()  # a synonym may be two words
    if len(words) > WINDOW:
        at = rng.randrange(0, len(words) - WINDOW + 1)
        words = words[at:at + WINDOW]
    q = " ".join(words)
    if len(words) < 5 or len(lexical.analyze(q)) < 4:
        return None
    if set(lexical.analyze(q)) & banned:  # a synonym brought a heading word back
        return None
    return q


def draw(name: str, seed: int, per_corpus: int) -> list[dict]:
    root = corpora.unpack(name)
    every = corpora.markdown_files(root)
    chosen = {p for p in corpus_files(name, root)}
    parsed: dict[Path, list] = {}
    seen: dict[str, int] = {}
    for path in every:
        text, _ = sections.decode(path.read_bytes())
        secs = sections.split_sections(text)
        doc = sections.parse_document(text)
        if path in chosen:
            parsed[path] = (secs, doc.title)
        for s in secs:
            for sent in set(key(x) for x in prose_sentences(s.text)):
                seen[sent] = seen.get(sent, 0) + 1
    rng = random.Random(f"{seed}:{name}")
    files = sorted(parsed, key=lambda p: p.relative_to(root).as_posix())
    rng.shuffle(files)
    out: list[dict] = []
    for path in files:
        if len(out) >= per_corpus:
            break
        rel = path.relative_to(root).as_posix()
        secs, title = parsed[path]
        cands = []
        for s in secs:
            if s.level < 1:
                continue
            sents = [x for x in prose_sentences(s.text) if seen.get(key(x)) == 1]
            if sents:
                cands.append((s, sents))
        rng.shuffle(cands)
        for s, sents in cands:
            banned = set(lexical.analyze(" ".join(s.trail))) | set(lexical.analyze(title or ""))
            banned |= set(lexical.analyze(" ".join(lexical.tokenize_path(rel))))
            sent = rng.choice(sents)
            q = question(sent, banned, rng)
            if q is None:
                continue
            out.append({"q": q, "corpus": name, "path": rel, "start": s.start, "end": s.end,
                        "trail": list(s.trail), "sentence": sent})
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--per-corpus", type=int, default=PER_CORPUS)
    a = ap.parse_args()
    qs = [q for name in CORPORA for q in draw(name, a.seed, a.per_corpus)]
    head = ("# Known-item questions for bench/hybrid.py, drawn by bench/hybrid_questions.py "
            f"(seed {a.seed}, {a.per_corpus} per corpus).\n# Committed before any ranking run over them; "
            "never edited to fit results. `start`/`end` are the target section's\n# lines (folio's "
            "sectioner, undivided); `sentence` is the source the question was drawn from.\n")
    sys.stdout.write(head + yaml.safe_dump({"seed": a.seed, "questions": qs}, sort_keys=False, allow_unicode=True,
                                           width=120))


if __name__ == "__main__":
    main()
