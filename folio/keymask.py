"""The API key kept out of everything a server sends back that folio may print.

A careless server echoes what it got ("invalid key sk-..."), as sent or encoded. Mask.scrub
replaces the key in any form _key_forms lists, without regard to case; a message that shows it
only once its HTML references or URL escapes are undone is shown so decoded, the key replaced;
and a message that still shows it, or holds a key of under 4 characters (any word's letters), is
withheld whole. Must not know about HTTP or embeddings.
"""

from __future__ import annotations

import base64
import json
import re


class Mask:
    """One key's mask: `scrub(text)` is `text` without the key."""

    WITHHELD = "(the server's message is withheld: it holds your API key)"

    def __init__(self, key: str):
        self.key, self.folded = key, key.casefold()
        forms = sorted(_key_forms(key), key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, forms)), re.IGNORECASE)

    def scrub(self, text: str) -> str:
        if len(self.key) < 4:
            shows = any(self.pattern.search(v) or self.folded in v.casefold() for v in _views(text))
            return self.WITHHELD if shows else text
        for view in _views(text):  # as sent first; else decoded, where the key shows whole
            view = self.pattern.sub("(your API key)", view)
            if not any(self.folded in v.casefold() for v in _views(view)):
                return view
        return self.WITHHELD


def _key_forms(key: str) -> set[str]:
    """The key as a server may echo it (matched without regard to case, so upper case and either hex
    case too): as sent, URL-encoded (`+` or `%20` for a space), JSON-escaped, in hex (bare or `\\x`
    escapes), HTML-escaped (named, decimal or hex character references), and base64 (standard and
    URL-safe, with or without padding)."""
    import html
    from urllib.parse import quote, quote_plus

    raw = key.encode("utf-8", "surrogatepass")
    forms = {key, json.dumps(key)[1:-1], quote(key, safe=""), quote_plus(key, safe=""), quote(key), raw.hex(),
             "".join(f"\\x{b:02x}" for b in raw), html.escape(key), html.escape(key, quote=False),
             "".join(f"&#{ord(c)};" for c in key), "".join(f"&#x{ord(c):x};" for c in key)}
    for b64 in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        forms |= {b64, b64.rstrip("=")}
    return {f for f in forms if f}


def _views(text: str) -> list[str]:
    """`text`, and `text` with its HTML references, its URL escapes, or both undone: where a key echoed
    in a form _key_forms does not list (a mix of them) shows."""
    import html
    from urllib.parse import unquote

    return [text, html.unescape(text), unquote(text), unquote(html.unescape(text))]
