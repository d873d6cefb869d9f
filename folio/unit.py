"""`folio unit`: a service file (systemd user unit or launchd agent) that serves this corpus's
embeddings endpoint with llama-server or text-embeddings-inference.

Owns building the text and the few facts it needs: the binary on PATH, and the context length a
GGUF file records in its header. Must not print, install or start anything: cli prints the text.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from folio import DISTRIBUTION
from folio.errors import FolioError

BACKENDS = {"llama.cpp": "llama-server", "tei": "text-embeddings-router"}
POOLINGS = ("mean", "cls", "last", "rank")
LLAMA_PLACEHOLDER = "/path/to/embedding-model.gguf"
TEI_PLACEHOLDER = "/path/to/model-directory"
DEFAULT_CONTEXT = 512  # when the model is unknown: safe for every BERT-style embedding model
LABEL = "folio-embeddings"
INSTALL_HINT = (f"folio itself, where it is not installed yet: `pipx install {DISTRIBUTION}` or "
                f"`uv tool install {DISTRIBUTION}` (not `pip install folio`: another project's name)")


@dataclass(frozen=True)
class Unit:
    text: str
    kind: str  # systemd | launchd
    install_path: str  # where the user would save it
    warnings: tuple[str, ...]
    argv: tuple[str, ...]


def build(endpoint: str, *, backend: str = "llama.cpp", kind: str | None = None, model: str | None = None,
          context: int | None = None, batch: int | None = None, pooling: str | None = None,
          binary: str | None = None, corpus: str | None = None) -> Unit:  # fmt: skip
    """The service file for `endpoint`'s host and port. Warnings name what the user must still fix."""
    kind = kind or ("launchd" if sys.platform == "darwin" else "systemd")
    if backend == "tei":
        if context is not None or batch is not None:
            raise FolioError("--ctx and --batch set llama-server's -c/-b/-ub; text-embeddings-inference has "
                             "no such flags (drop them, or use --backend llama.cpp)", exit_code=2)
        if pooling == "rank":
            raise FolioError("text-embeddings-inference has no rank pooling for embeddings; use mean, cls or "
                             "last, or leave --pooling out", exit_code=2)
        pooling = {"last": "last-token"}.get(pooling or "", pooling)
    warnings: list[str] = []
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FolioError(f"the endpoint {endpoint} is not an http:// URL; set one with "
                         f"`folio config set endpoint http://127.0.0.1:8080/v1/embeddings`")
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.scheme == "https":
        warnings.append(f"the endpoint is https: neither server below speaks TLS as printed; put a TLS proxy in "
                        f"front of port {port}, or point folio at http://")
    if parts.path.rstrip("/") != "/v1/embeddings":
        server = "llama-server" if backend == "llama.cpp" else "text-embeddings-inference"
        warnings.append(f"the endpoint's path is {parts.path or '/'!r}, where {server} serves no OpenAI embeddings "
                        f"(folio would get 404s): set the endpoint to {parts.scheme}://{parts.netloc}/v1/embeddings, "
                        f"unless a proxy in front maps it")
    if port < 1024 and kind == "systemd":
        warnings.append(f"port {port} is privileged: a user service cannot listen on it; set the endpoint to a "
                        f"port above 1023 (http://{parts.netloc.rsplit(':', 1)[0] if parts.port else parts.netloc}:8080/v1/embeddings)")
    if host not in ("127.0.0.1", "localhost", "::1"):
        warnings.append(f"the endpoint names host {host}: install this unit on that machine; it listens on every "
                        f"interface (0.0.0.0) without authentication")
        host = "0.0.0.0"

    exe = binary or BACKENDS[backend]
    found = shutil.which(exe)
    if found:
        exe = os.path.abspath(found)  # `--binary ./llama-server`, or `.` on PATH: a service starts elsewhere
    else:
        project = "llama.cpp" if backend == "llama.cpp" else "text-embeddings-inference"
        warnings.append(f"{exe} is not on PATH: install {project}, or pass --binary with its full path")

    if model is not None:
        model = _model_path(model, backend, warnings)
    env: dict[str, str] = {}
    notes: list[str] = []
    if backend == "llama.cpp":
        if model is None:
            warnings.append(f"no --model given: replace {LLAMA_PLACEHOLDER} with your GGUF embedding model "
                            f"(llama-server -hf would need a network at every start)")
        gguf = None if model is None else gguf_context(Path(model))
        if context is None:
            context = gguf or DEFAULT_CONTEXT
            if gguf is None:
                warnings.append(f"-c/-b/-ub set to {DEFAULT_CONTEXT} tokens: set --ctx to your model's context "
                                f"length (`folio doctor` shows it as n_ctx_train)")
        batch = batch or context
        notes.append(f"-c {context} -b {batch} -ub {batch}: llama-server embeds an input only whole, inside one physical batch; "
                     f"with the batch at the model's context it takes every input the model can (folio divides "
                     f"longer sections)")
        argv = [exe, "--embeddings", "-m", model or LLAMA_PLACEHOLDER, "--host", host, "--port", str(port),
                "-c", str(context), "-b", str(batch), "-ub", str(batch)]
        if pooling:
            argv += ["--pooling", pooling]
    else:
        if model is None:
            warnings.append(f"no --model given: replace {TEI_PLACEHOLDER} with a local model directory "
                            f"(a hub id would need a network at every start)")
        argv = [exe, "--model-id", model or TEI_PLACEHOLDER, "--hostname", host, "--port", str(port)]
        if pooling:
            argv += ["--pooling", pooling]
        # TEI's --auto-truncate is a switch (off unless given): leave it out, and pin it off in the
        # environment too, so an inherited AUTO_TRUNCATE=true cannot make it cut long sections silently.
        env["AUTO_TRUNCATE"] = "false"
        notes.append("AUTO_TRUNCATE=false: text-embeddings-inference cuts long inputs silently only when its "
                     "auto-truncate switch is on; it stays off, so folio hears about a too-long section and "
                     "divides it")

    about = _one_line(f"embeddings for folio at {endpoint}" + (f" (corpus {corpus})" if corpus else ""))
    if kind == "systemd":
        odd = next((c for c in exe if c in "\"'\\" or ord(c) < 32 or ord(c) == 127), None)
        if odd is not None:
            warnings.append(f"systemd refuses to start an executable whose path holds {odd!r} ({exe}): link or "
                            f"move the binary to a plain path and pass it with --binary")
        text = _systemd(argv, env, about, backend, notes)
        path = f"~/.config/systemd/user/{LABEL}.service"
    else:
        text = _launchd(argv, env, about, notes)
        path = "~/Library/LaunchAgents/org.folio.embeddings.plist"
    return Unit(text, kind, path, tuple(warnings), tuple(argv))


def _model_path(model: str, backend: str, warnings: list[str]) -> str:
    """The model as an absolute path (a service starts in another directory, and no shell expands `~`),
    with a warning when there is nothing there; a TEI model that reads as a hub id (`org/name`) is kept."""
    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve())
    if backend == "tei" and not model.startswith(("/", "./", "../", "~")):
        return model  # a hub id: text-embeddings-inference fetches it
    warnings.append(f"the model {path.absolute()} does not exist: the service fails to start until it does "
                    f"(check the path given to --model)")
    return str(path.absolute())


def _one_line(text: str) -> str:
    """Text for a comment or a description: a line break there would end the line, and what followed
    would be read as a setting of its own."""
    return "".join(c if ord(c) >= 32 and ord(c) != 127 else "?" for c in text)


def _systemd_quote(arg: str, *, executable: bool = False) -> str:
    """One word of an ExecStart= line (systemd.service, "Command lines"): `%` is a specifier and `$` a
    variable (`${HOME}`) unless doubled, except in the executable, which systemd takes literally;
    quoted, a backslash, a quote and a control character are C-escaped."""
    arg = arg.replace("%", "%%")
    if not executable:
        arg = arg.replace("$", "$$")
    if arg and not any(c in arg for c in ' \t"\'\\;$') and all(ord(c) >= 32 and ord(c) != 127 for c in arg):
        return arg
    body = arg.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if ord(c) >= 32 and ord(c) != 127 else f"\\x{ord(c):02x}" for c in body) + '"'


def _systemd(argv, env, about, backend, notes) -> str:
    lines = [
        f"# {about}",
        f"# Save as ~/.config/systemd/user/{LABEL}.service, then:",
        f"#   systemctl --user daemon-reload && systemctl --user enable --now {LABEL}",
        "# Check it with `folio doctor`.",
        f"# {INSTALL_HINT}",
        *[f"# {n}" for n in notes],
        "[Unit]",
        f"Description={'llama-server' if backend == 'llama.cpp' else 'text-embeddings-inference'} "
        f"{about.replace('%', '%%')}",  # a specifier there too (`%n`: the unit's name)
        "After=network.target",
        "",
        "[Service]",
        *[f"Environment={k}={v}" for k, v in env.items()],
        "ExecStart=" + " ".join(_systemd_quote(a, executable=i == 0) for i, a in enumerate(argv)),
        "Restart=on-failure",
        "RestartSec=2",
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return "\n".join(lines)


def _launchd(argv, env, about, notes) -> str:
    odd = next((a for a in argv if any(ord(c) < 32 and c not in "\t\n" for c in a)), None)
    if odd is not None:  # XML 1.0 holds no control character, and reads a carriage return as a line feed
        raise FolioError(f"a launchd plist cannot hold the control character in {odd!r}: rename the file or "
                         f"directory without it", exit_code=2)
    # an XML comment may not hold `--` (a corpus at notes--2024/): the plist would not load at all
    about, notes = (re.sub("-(?=-)", "- ", t) for t in (about, "".join(f"\n     {escape(n)}" for n in notes)))
    args = "\n".join(f"    <string>{escape(a)}</string>" for a in argv)
    envs = ""
    if env:
        items = "\n".join(f"    <key>{escape(k)}</key><string>{escape(v)}</string>" for k, v in env.items())
        envs = f"  <key>EnvironmentVariables</key>\n  <dict>\n{items}\n  </dict>\n"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
        f"<!-- {escape(about)}\n"
        "     Save as ~/Library/LaunchAgents/org.folio.embeddings.plist, then:\n"
        "       launchctl load -w ~/Library/LaunchAgents/org.folio.embeddings.plist\n"
        "     Check it with `folio doctor`.\n"
        f"     {escape(INSTALL_HINT)}"
        + notes + " -->\n"
        '<plist version="1.0">\n<dict>\n'
        "  <key>Label</key><string>org.folio.embeddings</string>\n"
        f"  <key>ProgramArguments</key>\n  <array>\n{args}\n  </array>\n"
        f"{envs}"
        "  <key>RunAtLoad</key><true/>\n"
        "  <key>KeepAlive</key><true/>\n"
        "  <key>StandardErrorPath</key><string>/tmp/folio-embeddings.log</string>\n"
        "</dict>\n</plist>"
    )


# --------------------------------------------------------------------------- GGUF header

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
                 12: "<d"}  # fmt: skip
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def gguf_context(path: Path) -> int | None:
    """The training context length a GGUF file records (`<arch>.context_length`), or None."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                return None
            version, _tensors, n_kv = struct.unpack("<IQQ", f.read(20))
            if version < 2:
                return None
            values: dict[str, object] = {}
            for _ in range(min(n_kv, 10_000)):
                key = _gguf_string(f)
                vtype = struct.unpack("<I", f.read(4))[0]
                value = _gguf_value(f, vtype)
                if key == "general.architecture" or key.endswith(".context_length"):
                    values[key] = value
                arch = values.get("general.architecture")
                if isinstance(arch, str) and f"{arch}.context_length" in values:
                    n = values[f"{arch}.context_length"]
                    return int(n) if isinstance(n, int) and n > 0 else None
    except (OSError, struct.error, UnicodeDecodeError, ValueError):
        return None
    return None


def _gguf_string(f) -> str:
    (n,) = struct.unpack("<Q", f.read(8))
    if n > 1 << 20:
        raise ValueError("string too long for a GGUF key")
    return f.read(n).decode("utf-8")


def _gguf_value(f, vtype: int):
    if vtype in _GGUF_SCALARS:
        fmt = _GGUF_SCALARS[vtype]
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
    if vtype == _GGUF_STRING:
        (n,) = struct.unpack("<Q", f.read(8))
        return f.read(n).decode("utf-8", "replace")
    if vtype == _GGUF_ARRAY:
        etype, count = struct.unpack("<IQ", f.read(12))
        if etype in _GGUF_SCALARS:
            f.seek(struct.calcsize(_GGUF_SCALARS[etype]) * count, 1)
        else:
            for _ in range(count):
                _gguf_value(f, etype)
        return None
    raise ValueError(f"unknown GGUF value type {vtype}")
