"""What `folio mcp` tells an agent: the server's instructions and each tool's and shared argument's
description, as the host shows them to the model. Words only: mcp.py publishes them with the tools.
Keep them true to SKILL.md and the commands' --help.
"""

INSTRUCTIONS = (
    "folio finds the section of a Markdown corpus (docs, notes, specs, design records) that answers a "
    "question, by meaning and by its words together. A result is a reference (path:start-end and "
    "its heading trail), never a body: read those lines (the show tool, given the row's "
    "citation.sha and trail) before you answer from them. The ls tool lists the documents a frontmatter filter keeps. Use grep/rg instead for an "
    "exact string, identifier, flag or error message, and to learn whether something is mentioned "
    "at all (a ranking always returns something).")

QUERY_DOC = (
    "Rank the sections of the Markdown corpus that answer a question (the default mode \"hybrid\": "
    "by meaning, so the words need not match, fused with a ranking by the words themselves). Returns "
    "references (path:start-end, heading trail, score, freshness), never text: read the lines with "
    "the show tool (with the row's citation.sha and trail) before using them; a score only orders candidates, and the answer is often #2 "
    "or #3. Check three things in every answer: `mode` (what actually ranked; \"lexical\" when you "
    "did not ask for it means the embeddings server did not answer in time: the rows are word "
    "matches, and an unreachable server is not an empty corpus), each row's `freshness` (current: "
    "read the range as given; stale: the file changed since it was indexed and the lines may have "
    "moved, read them with show; missing: the file is gone, skip it), and `notices` (a lexical "
    "fallback, refreshed files, a partial index, documents dropped by exclude_pointed_by, a filter "
    "that matched nothing). `where` values match exactly and case-sensitively on the file's own "
    "text (status=Final, not status=final), and nested keys are dotted (milestone.alpha=v1.21); the "
    "status tool lists the keys and values, the ls tool the documents a filter keeps. A question in "
    "your own words that misses can retry with mode \"semantic\"; words of the corpus's own "
    "vocabulary or identifiers are what the default \"hybrid\" ranks well, and mode \"lexical\" "
    "is their retry; for an exact string, use grep/rg.")

WORDS_DOC = (
    "Optional: words or short phrases the answer likely contains, as you would guess them (e.g. "
    "'retry backoff \"exponential delay\"', or a list): ranked by the words themselves and fused with "
    "the question. Write them when you can guess the corpus's own terms, names or identifiers.")
PASSAGE_DOC = (
    "Optional: a few sentences (40-80 words) written as the answering section would be, or a list of "
    "such: ranked by meaning and fused with the question, in the question's one request to the "
    "server. Write one when the question is short or your words may not be the corpus's.")

SHOW_DOC = (
    "Read lines of a corpus file as they are now, with a citation. `ref` is path:start-end with the "
    "path as a query row gives it: its `path` (relative to the corpus root, whatever this server's "
    "working directory) or its `ref`, e.g. \"docs/client.md:40-72\". The citation carries the file's "
    "sha when indexed and its freshness (current; stale: the file changed since it was indexed, so "
    "the lines may have moved: query again for a current range; missing). Give the row's "
    "citation.sha as `sha` and its `trail` too: the file may have been re-indexed since the query "
    "(the same lines then hold other text), and `since_row.state` says what became of the row's lines "
    "(same; in_place; moved: the section the row named is shown where it is now, `start`-`end`; "
    "not_found and changed are errors: query again).")

STATUS_DOC = (
    "What the index holds: files, sections, model and endpoint, files changed since indexing, and the "
    "frontmatter keys with how many documents carry each and a few of their values (what `where` "
    "filters on). `key`: every value of that key with its document count. `truncated`: instead, the "
    "records whose over-long single line was cut (only its start was embedded).")

LS_DOC = (
    "List the documents (files) that frontmatter filters keep, without a question: each one's path "
    "(relative to the corpus root), title and frontmatter. `where`, `exclude_pointed_by` and "
    "`identity` mean exactly what they mean for the query tool (a document is kept when a query "
    "would keep its sections); no embeddings server is needed. One call answers \"which documents "
    "are X\": no need to grep frontmatter. `key`: only these frontmatter keys in each answer.")

INDEX_DOC = (
    "Bring the index up to date with the files on disk (incremental: only new and changed files "
    "are embedded), with the endpoint and model the index recorded. Queries already refresh the "
    "files behind their results; call this after many files changed or were added. Waits for this server's own "
    "update of the index under way; refused when another folio is writing it.")

SIMILAR_DOC = (
    "The sections nearest in meaning to a section already indexed, to a file's sections, or to a text: \"what "
    "else says this?\". Before writing a new note, pass its draft as `text` (or an existing file as `ref`) to find "
    "the notes that already say it: near-duplicates come first, `score` is the cosine similarity (1.0: the same "
    "text; above about 0.9: very likely the same content), and each row's `like` names the source section it "
    "is nearest to. A `ref` the index holds costs no request to the embeddings server (its stored vectors rank); "
    "the source's own sections are left out. Filters as for the query tool.")

WHERE_DOC = ("Frontmatter filters: one predicate or a list of them, all ANDed: key=value (for a list "
             "value: contains it), key~=value (one item of a comma-separated value, e.g. requires~=1559 "
             "matches `requires: 1559, 2718`), key (present), !key (absent), key!=value (differs, or absent); '|' ORs "
             "whole predicates inside one item. Values match exactly and case-sensitively; nested keys are "
             "dotted (milestone.alpha=v1.21).")
EXCLUDE_DOC = ("A frontmatter key, or a list of them: drop documents whose identity appears in any "
               "document's value of that key (e.g. \"supersedes\"); `dropped` counts the documents dropped.")
IDENTITY_DOC = ("Frontmatter key holding a document's identity, which exclude_pointed_by values name; "
                "\"@path\": the document's file path (when the pointers are paths).")
