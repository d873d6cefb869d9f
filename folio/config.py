"""Settings resolution with provenance: flag > environment > folio.yaml > user config > default.

Owns finding the corpus root (walking up like git), reading and writing the two YAML files.
Whether the API key goes to an endpoint is space.py's (key_policy, beside the Target it fills). Must not import numpy or httpx: `folio --help` and `folio config` stay lean.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections import namedtuple
from pathlib import Path
from urllib.parse import urlsplit

from folio.errors import FolioError

DEFAULT_ENDPOINT = "http://127.0.0.1:8080/v1/embeddings"
DEFAULT_MODEL = "default"
PROJECT_FILE = "folio.yaml"
INDEX_DIR = ".folio"
DEFAULT_BUDGET = 8000
DEFAULT_BATCH = 32

# Every key folio reads, with its default and which files may hold it.
# "project": may live in folio.yaml (committed with the corpus); "user": in the user config.
SECRETS = frozenset({"api_key"})  # never printed: `folio config` shows only whether one is set

KEYS: dict[str, dict] = {
    "endpoint": {"default": DEFAULT_ENDPOINT, "env": "FOLIO_ENDPOINT", "project": True, "user": True},
    "model": {"default": DEFAULT_MODEL, "env": "FOLIO_MODEL", "project": True, "user": True},
    "mode": {"default": "hybrid", "env": "FOLIO_MODE", "project": True, "user": True},
    # Pseudo-relevance feedback on the semantic plane (folio/feedback.py): auto = hybrid ranking only.
    "feedback": {"default": "auto", "env": "FOLIO_FEEDBACK", "project": True, "user": True},
    "max_chars": {"default": DEFAULT_BUDGET, "env": None, "project": True, "user": True},
    "batch_size": {"default": DEFAULT_BATCH, "env": None, "project": True, "user": True},
    "jobs": {"default": 1, "env": None, "project": True, "user": True},
    "timeout": {"default": 60, "env": "FOLIO_TIMEOUT", "project": True, "user": True},
    # The most a query waits on the embeddings server (its question's vector and the refresh of the
    # files behind its rows, together), in seconds: past it the query answers from what it has.
    "query_timeout": {"default": 5, "env": "FOLIO_QUERY_TIMEOUT", "project": True, "user": True},
    # How a running `folio mcp` (and `folio index --watch`) follows the files (folio/watch.py): auto
    # (events, or listing the tree every watch_interval seconds on a network filesystem), events,
    # poll, or off (`folio mcp` leaves the index as it is).
    "watch": {"default": "auto", "env": "FOLIO_WATCH", "project": True, "user": True},
    "watch_interval": {"default": 2, "env": "FOLIO_WATCH_INTERVAL", "project": True, "user": True},
    "extensions": {"default": [".md"], "env": None, "project": True, "user": False},
    "exclude": {"default": [], "env": None, "project": True, "user": False},
    # The query/document roles (see space.py): unset (None) lets a preset for the model's family apply.
    "query_prefix": {"default": None, "env": None, "project": True, "user": True},
    "document_prefix": {"default": None, "env": None, "project": True, "user": True},
    "query_fields": {"default": None, "env": None, "project": True, "user": True},
    "document_fields": {"default": None, "env": None, "project": True, "user": True},
    "api_key": {"default": None, "env": "FOLIO_API_KEY", "project": False, "user": True},
    "key_hosts": {"default": [], "env": None, "project": False, "user": True},
    "allow_insecure_key": {"default": False, "env": None, "project": False, "user": True},
}
LIST_KEYS = ("extensions", "exclude", "key_hosts")
USAGE = ("--", "folio config set")  # a bad value typed on the command line exits 2
INT_KEYS = ("max_chars", "batch_size", "jobs", "timeout", "query_timeout", "watch_interval")
# The whole numbers' bounds, and why the upper one: past it a value is a slip (`--jobs 100000`), and
# the time, memory or requests it would ask for are refused in one sentence instead.
INT_BOUNDS = {
    "max_chars": (200, 1_000_000, "a record's character budget: a million characters is past any embedding "
                                  "model's context, whose token limit divides records anyway"),
    "batch_size": (1, 4096, "inputs in one request"),
    "jobs": (1, 64, "embedding requests at once: more only wait in the server's queue"),
    "timeout": (1, 3600, "seconds for one request: an hour, and ten times that with every retry"),
    "query_timeout": (1, 3600, "seconds a query waits on the server, all its requests together"),
    "watch_interval": (1, 3600, "seconds between two listings of the tree when the files are polled"),
}
BOOL_KEYS = ("allow_insecure_key",)
PREFIX_KEYS = ("query_prefix", "document_prefix")
FIELDS_KEYS = ("query_fields", "document_fields")
ROLE_KEYS = PREFIX_KEYS + FIELDS_KEYS
OWN_FIELDS = ("input", "model", "encoding_format")  # folio writes these in every embeddings request
MODES = ("semantic", "lexical", "hybrid")  # how `folio query` ranks: see planes.py and fusion.py
FEEDBACK = ("auto", "on", "off")  # which modes get pseudo-relevance feedback: see feedback.py
WATCH = ("auto", "events", "poll", "off")  # how a live index follows the files: see watch.py


# Plain classes, not dataclasses: `folio index` reads its settings in the child that lists the tree
# (readahead), before anything else, and importing dataclasses costs more than reading them.
Setting = namedtuple("Setting", "value source")  # source: "flag", "env FOLIO_ENDPOINT", "folio.yaml", ...


class Settings:
    __slots__ = ("root", "values", "user_file", "project_file")

    def __init__(self, root: Path | None, values: dict[str, Setting] | None = None, user_file: Path | None = None,
                 project_file: Path | None = None):
        self.root, self.values = root, values if values is not None else {}
        self.user_file, self.project_file = user_file, project_file

    def __getitem__(self, key: str):
        return self.values[key].value

    def source(self, key: str) -> str:
        return self.values[key].source


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG spec says to ignore it
        base = os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "folio" / "config.yaml"


def find_root(start: Path | None = None) -> Path | None:
    """The nearest directory at or above `start` holding `.folio/` or `folio.yaml` (like git)."""
    try:
        here = (start or Path.cwd()).resolve()
    except FileNotFoundError:  # the directory stood in was deleted under the shell
        raise FolioError("the current directory no longer exists (it was removed while you stood in it): `cd` into "
                         "the corpus again, or name its root (`folio index DIR`, `--root DIR`)") from None
    for d in (here, *here.parents):
        if (d / INDEX_DIR).is_dir() or (d / PROJECT_FILE).is_file():
            return d
    return None


def enclosing_index(root: Path) -> Path | None:
    """The nearest directory strictly above `root` holding an index (`.folio/`), if any."""
    here = root.resolve()
    for d in here.parents:
        if (d / INDEX_DIR).is_dir():
            return d
    return None


# A line `key: value` whose value YAML reads as a plain string or a decimal integer, whatever the
# version of YAML: a word starting with a letter (not one YAML 1.1 reads as a bool or null) or
# digits without a leading zero. Optional trailing comment.
_PLAIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*): +([A-Za-z][A-Za-z0-9._:/@+~-]*|[1-9][0-9]*|0) *(?: #.*)?")
_WORDS = frozenset({"y", "n", "yes", "no", "true", "false", "on", "off", "null"})


def _what(path: Path) -> str:
    if os.path.islink(path) and not os.path.exists(path):
        return "a symlink to nothing"
    mode = os.stat(path).st_mode
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")


def _plain_yaml(text: str) -> dict | None:
    """What yaml.safe_load makes of a settings file of plain `key: value` lines (blank and comment
    lines aside), without importing yaml (a sixth of a no-op re-index); None for anything else —
    lists, quotes, indentation, a repeated key — which yaml reads."""
    out: dict = {}
    for line in text.split("\n"):
        m = _PLAIN.fullmatch(line)
        if m is None:
            if line.strip() and not line.lstrip().startswith("#"):
                return None
            continue
        key, value = m.groups()
        if key in out or value.endswith(":") or value.lower() in _WORDS:
            return None
        out[key] = int(value) if value[0].isdigit() else value
    return out


class _Repeated(Exception):
    def __init__(self, key, line: int, first: int):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


def _loader():
    """yaml.SafeLoader that refuses a key given twice in one mapping (YAML forbids it; PyYAML keeps the
    last in silence, and `folio config set` would edit the first)."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for k, _v in node.value:
                if k.tag == "tag:yaml.org,2002:merge":  # `<<: *base` merges, as YAML means it to
                    continue
                key = self.construct_object(k, deep=True)
                try:
                    if key in seen:
                        raise _Repeated(key, k.start_mark.line + 1, seen[key])
                    seen[key] = k.start_mark.line + 1
                except TypeError:  # an unhashable key: SafeLoader says so itself
                    pass
            return super().construct_mapping(node, deep)

    return Loader


def _load_yaml(path: Path) -> dict:
    if not path.is_file():
        if os.path.lexists(path):  # a directory, a FIFO, a link to a device or to nothing: never read, never silent
            raise FolioError(f"{path} is not a file of settings (it is {_what(path)}): make it a YAML file of "
                             f"`key: value` lines, or remove it")
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FolioError(f"{path}: cannot be read ({e})") from None
    plain = _plain_yaml(text)
    if plain is not None:
        return plain
    import yaml  # safe_load only: a folio.yaml can never construct objects

    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader that refuses a repeated key
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        if "'\\t'" in problem:  # PyYAML's own words for a tab were no fix
            problem += ": YAML indents with spaces and reads no tab there; write spaces instead"
        raise FolioError(f"{path}{where}: not valid YAML ({problem}); fix or delete the file") from None
    except _Repeated as e:
        raise FolioError(f"{path} line {e.line}: `{e.key}` is set twice (also on line {e.first}), and only the "
                         f"last would count; keep one") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FolioError(f"{path}: cannot be read ({e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FolioError(f"{path}: expected a mapping of settings (key: value), found {type(data).__name__}")
    return data


def _coerce(key: str, value, origin: str):
    """`value` checked and made the type `key` takes; a bad one is one sentence naming `origin`, and a
    usage error (exit 2) when it was typed on the command line (a flag, `folio config set`), an error
    (exit 1) when it stands in a file or the environment."""
    try:
        return _checked(key, value, origin)
    except FolioError as e:
        if origin == KEYS[key]["env"]:  # the variable is named; say what else ends it
            e = FolioError(f"{e} (or unset {origin}, and the files' value or the default applies)")
        e.exit_code = 2 if origin.startswith(USAGE) else 1
        raise e from None


def _checked(key: str, value, origin: str):
    if key in LIST_KEYS:
        if isinstance(value, str):
            value = _list_text(key, value, origin)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FolioError(f"{origin}: `{key}` must be a list of strings, got {value!r}; write it as "
                             f"{_LIST_EXAMPLE[key]}")
        if key == "extensions":
            value = [v if v.startswith(".") else "." + v for v in value]
        return value
    if key in INT_KEYS:
        least, most, what = INT_BOUNDS[key]
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise TypeError  # YAML's `yes` is no 1, and `1.5` is cut to 1 by int()
            n = int(value)
        except (TypeError, ValueError, OverflowError):
            raise FolioError(f"{origin}: `{key}` must be a whole number from {least} to {most}, got {value!r}") from None
        if n < least:
            raise FolioError(f"{origin}: `{key}` is too small ({n}); it must be at least {least}")
        if n > most:
            raise FolioError(f"{origin}: `{key}` is too large ({n}); it must be at most {most} ({what})")
        return n
    if key in BOOL_KEYS:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "yes", "1"):
            return True
        if str(value).lower() in ("false", "no", "0"):
            return False
        raise FolioError(f"{origin}: `{key}` must be true or false")
    if key in PREFIX_KEYS:
        if value is None:
            return ""  # `query_prefix:` with nothing after it: no prefix, and no preset either
        if not isinstance(value, str):
            raise FolioError(f"{origin}: `{key}` must be text (the words put before each "
                             f"{key.split('_')[0]}), got {value!r}; quote it in YAML")
        return value
    if key in FIELDS_KEYS:
        return _fields(key, value, origin)
    if key == "mode":
        value = value.lower() if isinstance(value, str) else value  # `Hybrid`, as watch and feedback take any case
        if value not in MODES:
            raise FolioError(f"{origin}: `mode` must be semantic, lexical or hybrid, got {value!r}; set one of "
                             f"those (hybrid fuses the semantic and lexical rankings)")
        return value
    if key == "feedback":
        return _feedback(value, origin)
    if key == "watch":
        word = "off" if value is False or str(value).lower() in ("false", "no", "0") else str(value).lower()
        if word not in WATCH:
            raise FolioError(f"{origin}: `watch` must be auto, events, poll or off, got {value!r}; auto follows "
                             f"file-system events (polling on a network filesystem)")
        return word
    if value is None:
        return None
    if key == "endpoint":
        return _endpoint(str(value), origin)
    return str(value)


_LIST_EXAMPLE = {"extensions": "`.md, .markdown` or `[.md, .markdown]`", "exclude": "`drafts/**, old/**` or "
                 "`['drafts/**', 'old/**']`", "key_hosts": "`api.example.com, other.example.com` or "
                 "`[api.example.com, other.example.com]`"}


def _list_text(key: str, text: str, origin: str) -> list:
    """A list typed as one string (`folio config set`, or a YAML string): a YAML flow list (`[a, b]`,
    whose items may be quoted to hold a comma), or items split on commas (`a, b`). An item with a
    bracket left open (`[a, b`) is refused, not written as a glob (`[abc]*.md` is one: a class)."""
    if not (text.strip().startswith("[") and text.strip().endswith("]")):
        items = [v.strip() for v in text.split(",") if v.strip()]
        for v in items:
            if v.count("[") != v.count("]"):
                raise FolioError(f"{origin}: `{key}` item {v!r} has an unmatched bracket; write the list as "
                                 f"{_LIST_EXAMPLE[key]}")
        return items
    import yaml

    try:
        items = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise FolioError(f"{origin}: `{key}` {text!r} is not a list YAML can read ({getattr(e, 'problem', e)}); "
                         f"write it as {_LIST_EXAMPLE[key]}") from None
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise FolioError(f"{origin}: `{key}` {text!r} must be a list of strings (quote an item YAML reads as a "
                         f"number, a date or true/false); write it as {_LIST_EXAMPLE[key]}")
    return [v.strip() for v in items if v.strip()]


def _feedback(value, origin: str) -> str:
    """auto, on or off; YAML reads a bare `on`/`off` as a bool, and 1/0, true/false say the same."""
    word = str(value).lower()
    word = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}.get(word, word)
    if word not in FEEDBACK:
        raise FolioError(f"{origin}: `feedback` must be auto, on or off, got {value!r}; auto gives hybrid "
                         f"ranking pseudo-relevance feedback, on gives it semantic ranking too")
    return word


def _fields(key: str, value, origin: str) -> dict:
    """A map of JSON fields added to each embeddings request (e.g. {input_type: query}); from the
    command line, a YAML or JSON mapping in one string."""
    import json

    given = value
    if value is None:
        return {}
    if isinstance(value, str):
        import yaml

        try:
            value = yaml.safe_load(value) if value.strip() else {}
        except yaml.YAMLError:
            value = None
    example = f"e.g. {{input_type: {key.split('_')[0] if key == 'query_fields' else 'passage'}}}"
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise FolioError(f"{origin}: `{key}` must be a map of JSON fields added to each embeddings request, "
                         f"{example}; got {given!r}")
    own = sorted(set(value) & set(OWN_FIELDS))
    if own:
        raise FolioError(f"{origin}: `{key}` must not set `{own[0]}` (folio writes {', '.join(OWN_FIELDS)} in "
                         f"every request itself); remove it")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise FolioError(f"{origin}: `{key}` holds a value JSON cannot carry (dates, NaN, ...): quote it; got "
                         f"{given!r}") from None
    return value


_CHAR_NAMES = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab", " ": "a space"}


def _endpoint(url: str, origin: str) -> str:
    """An endpoint is an http(s) URL; `localhost:8080` would be read as a URL scheme and fail later, far
    from the typo, so it is refused here with the URL that was probably meant."""
    if not url.strip() or url.strip() in ("http://", "https://"):
        raise FolioError(f"{origin}: the endpoint is empty; name the embeddings server's URL, like "
                         f"http://127.0.0.1:8080/v1/embeddings")
    bad = next((c for c in url.strip() if c.isspace() or ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:  # a line break would end a line wherever the URL is written (`folio unit`'s service file)
        shown = re.sub(r"//[^/]*@", "//***@", url.strip())
        raise FolioError(f"{origin}: endpoint {shown!r} holds {_CHAR_NAMES.get(bad, repr(bad))}, which no URL "
                         f"holds; write it on one line without spaces, like http://127.0.0.1:8080/v1/embeddings")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - a port that is not a number, or out of range, raises here
    except ValueError as e:  # `http://[::1` (an IPv6 address left open), `http://host:99999`
        shown = re.sub(r"//[^/]*@", "//***@", url.strip())  # credentials, if any, are not repeated
        raise FolioError(f"{origin}: endpoint {shown!r} is not a valid URL ({e}); write it like "
                         f"http://127.0.0.1:8080/v1/embeddings (an IPv6 address in brackets: http://[::1]:8080/...)") from None
    if "@" in parts.netloc:
        raise FolioError(
            f"{origin}: the endpoint {strip_userinfo(url.strip())} is given with credentials (`user:password@`); "
            f"folio takes none from a URL (a URL is printed, and recorded in the index): name the endpoint "
            f"without them and put the secret in FOLIO_API_KEY or `api_key` in your user config (sent as a "
            f"Bearer token, only over https or to this machine)")
    if parts.scheme in ("http", "https") and parts.netloc:
        return url.strip()
    bare = url.strip().split("://", 1)[-1].strip("/")
    meant = f"http://{bare}" + ("" if "/" in bare else "/v1/embeddings")
    raise FolioError(f"{origin}: endpoint {url!r} is not an http(s) URL; did you mean {meant}?")


def resolve(root: Path | None, flags: dict | None = None) -> Settings:
    """Every setting with the place it came from. `flags` holds command-line values (None = unset)."""
    flags = flags or {}
    user_file = user_config_path()
    user = _load_yaml(user_file)
    project_file = (root / PROJECT_FILE) if root else None
    project = _load_yaml(project_file) if project_file else {}
    for bad in ("api_key", "key_hosts", "allow_insecure_key"):
        if bad in project:
            raise FolioError(
                f"{project_file}: `{bad}` must not be in folio.yaml (it is committed with the corpus); "
                f"remove it and put it in {user_file} or the environment"
            )
    unknown = sorted(set(project) - set(KEYS))
    if unknown:
        raise FolioError(f"{_where(project_file, unknown[0])}: unknown setting `{unknown[0]}`{_meant(unknown[0])}; "
                         f"known keys: {', '.join(KEYS)}")
    for key in user:  # a typo there was passed over in silence, and the default used
        if key not in KEYS:
            raise FolioError(f"{_where(user_file, key)}: unknown setting `{key}`{_meant(key)}; known keys: "
                             f"{', '.join(k for k, spec in KEYS.items() if spec['user'])}")
        if not KEYS[key]["user"]:
            raise FolioError(f"{_where(user_file, key)}: `{key}` belongs to the corpus, not your user config, "
                             f"and was never read there; move it to folio.yaml at the corpus root "
                             f"(`folio config set --project {key} ...`)")
    settings = Settings(root=root, user_file=user_file, project_file=project_file)
    for key, spec in KEYS.items():
        if flags.get(key) is not None:
            setting = Setting(_coerce(key, flags[key], f"--{key.replace('_', '-')}"), "flag")
        elif spec["env"] and os.environ.get(spec["env"]):
            setting = Setting(_coerce(key, os.environ[spec["env"]], spec["env"]), f"env {spec['env']}")
        elif spec["project"] and key in project:
            setting = Setting(_from_file(key, project[key], project_file), PROJECT_FILE)
        elif spec["user"] and key in user:
            setting = Setting(_from_file(key, user[key], user_file), "user config")
        else:
            setting = Setting(spec["default"], "default")
        settings.values[key] = setting
    return settings


def _from_file(key: str, value, path: Path):
    """A file's value checked; a bad one named with its line (found only then: reading is kept lean)."""
    try:
        return _coerce(key, value, str(path))
    except FolioError:
        return _coerce(key, value, _where(path, key))


def _where(path: Path, key: str) -> str:
    """`path line N`, N the line that sets `key` at the top of the file, or `path` when none is found."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError):
        return str(path)
    n = next((i for i, ln in enumerate(lines, 1) if _key_line(key).match(ln)), None)
    return f"{path} line {n}" if n else str(path)


def _key_line(key: str) -> re.Pattern:
    """A top-level line setting `key`: `key:`, `"key":` or `'key' :`, followed by a value or nothing."""
    k = re.escape(key)
    return re.compile(rf"(?:{k}|\"{k}\"|'{k}')[ \t]*:(?=\s|$)")


def _meant(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key.lower(), list(KEYS), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def overruled(key: str, root: Path, *, project: bool) -> str | None:
    """After `folio config set`: the sentence saying that, in `root`, another source still decides
    `key` (the environment, or folio.yaml over the user config), and how to change it there, or that
    the settings here cannot be read at all; None when the value just written is the one in force."""
    env = KEYS[key]["env"]
    if env and os.environ.get(env):  # checked apart: a bad value there stops resolve() before it says so
        try:
            _coerce(key, os.environ[env], env)
            bad = ""
        except FolioError:
            bad = f" (and its value {os.environ[env]!r} is refused, by every command)"
        return f"note: here {key} still comes from env {env}{bad}, which wins over the file just written; unset {env} to use it"
    try:
        source = resolve(root, {}).source(key)
    except FolioError as e:
        return f"note: {key} was written, but the settings here still cannot be read: {e}"
    if source == (PROJECT_FILE if project else "user config"):
        return None
    return (f"note: here {key} still comes from {root / PROJECT_FILE}, which wins over the file just written; "
            f"`folio config set --project {key} ...` changes it there")


def set_value(key: str, value: str, *, project: bool, root: Path | None) -> tuple[Path, object]:
    """Write one key to folio.yaml (project) or the user config; returns the file written (the file a
    link there points to) and the value as written."""
    path = _settings_file(key, project, root)
    # what stands there and is no file (a directory, a FIFO, a link to a device) holds no settings to
    # keep: the write replaces it, or says why it cannot
    data = _load_yaml(path) if path.is_file() or not os.path.lexists(path) else {}
    data[key] = _coerce(key, value, "folio config set")
    _write(path, _with_key(path, key, data), key, project)
    return path, data[key]


def unset_value(key: str, *, project: bool, root: Path | None) -> tuple[Path, bool]:
    """Remove one key from folio.yaml (project) or the user config, so the next source decides it (as
    `git config --unset`); returns the file and whether it held the key. The file's other lines stay."""
    path = _settings_file(key, project, root, placed=False)  # a key refused there may still be removed
    if not path.is_file():
        return path, False
    data = _load_yaml(path)
    if key not in data:
        return path, False
    del data[key]
    _write(path, _with_key(path, key, data), key, project, "removed")
    return path, True


def _settings_file(key: str, project: bool, root: Path | None, placed: bool = True) -> Path:
    """The file `folio config set|unset [--project] KEY` edits (the file a link there points to), once
    KEY is known (and, `placed`, allowed there)."""
    if key not in KEYS:
        raise FolioError(f"unknown setting `{key}`{_meant(key)}; known keys: {', '.join(KEYS)}", exit_code=2)
    spec = KEYS[key]
    if placed and project and not spec["project"]:
        raise FolioError(
            f"`{key}` cannot go in folio.yaml (it is committed with the corpus); "
            f"run `folio config set {key} ...` without --project to keep it in your user config", exit_code=2
        )
    if placed and not project and not spec["user"]:
        raise FolioError(f"`{key}` belongs to the corpus; use `folio config set --project {key} ...`", exit_code=2)
    path = (root or Path.cwd()) / PROJECT_FILE if project else user_config_path()
    if path.is_symlink() and path.is_file():  # a link to the file (dotfiles, a shared folio.yaml): the file
        path = Path(os.path.realpath(path))   # it points to is edited, as git edits a linked config
    return path


def _write(path: Path, text: str, key: str, project: bool, done: str = "set") -> None:
    """The settings file replaced by `text` at once (a fresh file renamed over it), or one sentence."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        mode = stat.S_IMODE(path.stat().st_mode) if path.is_file() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        # A fresh file, never through a link (a clone can carry `folio.yaml.tmp -> elsewhere`), and
        # owner-only from its first byte when it is the user config (it may hold an API key).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)  # a link goes as a link
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o644 if project else 0o600)
        if mode is not None:  # the file keeps its mode (a user config never more open than owner-only)
            os.fchmod(fd, mode if project else mode & 0o700)
        with open(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _unwritable(path, key, e, project, done) from None


def _with_key(path: Path, key: str, data: dict) -> str:
    """The settings file's text with `key` set to data[key]: its line (and the lines indented under
    it) replaced in place, keeping a comment at its end, or the line added at the end, so the file's
    comments, order, byte-order mark and line endings stay (a folio.yaml is committed with the
    corpus, often copied from folio.yaml.example). A key not in `data` is removed the same way
    (`folio config unset`). When that text would not read back as `data`, the whole mapping written anew."""
    import yaml

    whole = yaml.safe_dump(data, sort_keys=False, allow_unicode=True) if data else ""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            old = fh.read()
    except FileNotFoundError:
        old = ""
    except (OSError, UnicodeDecodeError):
        return whole
    bom = "\ufeff" if old.startswith("\ufeff") else ""
    old = old[len(bom):]
    eol = "\r\n" if "\r\n" in old else "\n"
    new = yaml.safe_dump({key: data[key]}, sort_keys=False, allow_unicode=True, default_flow_style=False) \
        if key in data else ""
    lines = old.splitlines(keepends=True)
    at = next((i for i, ln in enumerate(lines) if _key_line(key).match(ln)), None)
    if at is None and not new:
        text = old
    elif at is None:
        text = old + ("" if not old or old.endswith("\n") else eol) + new.replace("\n", eol)
    else:
        end = at + 1
        while end < len(lines):  # the value's own lines: indented, list items, blank lines inside them
            nxt = next((ln for ln in lines[end:] if ln.strip()), "")
            if not (lines[end][:1] in (" ", "\t", "-") or (not lines[end].strip() and nxt[:1] in (" ", "\t", "-"))):
                break
            end += 1
        first, _, rest = new.partition("\n")
        line = (first + _comment(lines[at]) + "\n" + rest).replace("\n", eol) if new else ""
        text = "".join(lines[:at]) + line + "".join(lines[end:])
    try:
        if (yaml.load(bom + text, Loader=_loader()) or {}) == data:  # noqa: S506 - a SafeLoader
            return bom + text
    except (yaml.YAMLError, _Repeated):
        pass
    return whole


def _comment(line: str) -> str:
    """The comment that ends a `key: value  # why` line (with the spaces before it), or ''."""
    import yaml

    line = line.rstrip("\r\n")
    try:
        value = yaml.safe_load(line)
        for m in re.finditer(r"[ \t]+#", line):  # the first `#` after a space that is no part of the value
            if yaml.safe_load(line[: m.start()]) == value:
                return line[m.start():]
    except yaml.YAMLError:
        pass
    return ""


def _unwritable(path: Path, key: str, e: OSError, project: bool, done: str = "set") -> FolioError:
    """`folio config set` (or unset) could not write its file: one sentence naming it, why, and the fix."""
    import errno

    env = KEYS[key]["env"]
    elsewhere = f" (or set {env} in the environment)" if env else ""
    where = "" if project else ", or point XDG_CONFIG_HOME at a directory you can write"
    if e.errno == errno.ENOTDIR:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), path.parent)
        why, fix = f"{blocker} is a file, not a directory", f"move that file out of the way{where}"
    elif e.errno == errno.EISDIR:
        why, fix = f"{path} is a directory", f"move that directory out of the way{where}"
    else:
        why = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e)).lower()
        fix = f"make {path.parent} writable{where}"
    if project and KEYS[key]["user"] and done == "set":
        fix += f", or keep it in your user config (`folio config set {key} ...` without --project)"
    return FolioError(f"`{key}` was not {done}: cannot write {path} ({why}); {fix}{elsewhere}")


def strip_userinfo(url: str, mask: str = "***@") -> str:
    """`http://user:pw@host:8080/v1` -> `http://***@host:8080/v1` (mask="": `http://host:8080/v1`)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=mask + parts.netloc.rpartition("@")[2]).geturl()


def written(key: str, value) -> str:
    """The value `folio config set` wrote, as it reads in the file (`timeout = 5`, `exclude = ["a/"]`)."""
    import json

    if key in SECRETS or (isinstance(value, str) and key not in PREFIX_KEYS):
        return str(shown(key, value))
    return json.dumps(value, ensure_ascii=False)


def shown(key: str, value):
    """A setting's value as folio prints it: a secret shows only whether it is set."""
    if key in SECRETS:
        return "(set)" if value else "(not set)"
    return value
