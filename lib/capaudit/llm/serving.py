"""vLLM ``serve`` command lines from the YAML configs in ``serving/`` (spec §6, §9).

Config format (one file per served model)::

    capaudit:                       # ours; never passed to vLLM
      name: judge-qwen35-397b-a17b-fp8
      role: judge                   # extractor | judge | captioner | ci
      vllm_version: "0.20.1"        # the version the reference served with (informational)
      launcher: ["{vllm}", "serve"] # default; "{python}" and "{vllm}" are placeholders
      model_flag: null              # null: model is positional; "--model" for the module launcher
      env: {VLLM_CPU_KVCACHE_SPACE: "2"}
      unpinned_reason: null         # required when an HF model id has no revision
    model: Qwen/Qwen3.5-397B-A17B-FP8
    revision: ea5b4f81096f3901c91dea97f81324302495781d
    host: 127.0.0.1
    port: 8000
    vllm:                           # vllm serve long options, without the leading dashes
      tensor-parallel-size: 8
      enable-prefix-caching: true   # true → --flag, false → --no-flag, null → omitted
      mm-processor-kwargs: {max_pixels: 1003520}   # mappings/lists → compact JSON

Rules: an HF model id must carry a 40-hex ``revision`` (or an explicit ``unpinned_reason``);
``host`` defaults to ``127.0.0.1`` (the reference bound 0.0.0.0); ``${VAR:-default}`` and ``~``
are expanded in ``model`` and ``env`` values; option names must be lower-case with dashes.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import yaml

from capaudit.io.canonical_json import canonical

REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
FLAG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
TOP_KEYS = frozenset({"capaudit", "model", "revision", "host", "port", "vllm"})
MANAGED_FLAGS = frozenset({"model", "revision", "host", "port"})
SERVING_DIR = Path(__file__).resolve().parents[3] / "serving"


@dataclass
class ServeCommand:
    """A vLLM serve invocation: ``argv`` plus extra environment variables."""

    argv: List[str]
    env: Dict[str, str] = field(default_factory=dict)
    name: str = ""
    model: str = ""
    revision: Optional[str] = None
    served_model_name: str = ""
    warnings: List[str] = field(default_factory=list)

    def shell(self) -> str:
        """One shell line: ``VAR=value ... argv`` (each word quoted)."""
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join(env + [shlex.quote(a) for a in self.argv])


def expand(text: str) -> str:
    """Expand ``${VAR}`` / ``${VAR:-default}`` and a leading ``~``."""
    out = _VAR_RE.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), text)
    return os.path.expanduser(out)


def load_serving_config(path: str | Path) -> Dict[str, Any]:
    """Read and check a serving YAML config (``ValueError`` naming the file and key)."""
    p = Path(path)
    if not p.exists() and not p.suffix and (SERVING_DIR / f"{p}.yaml").exists():
        p = SERVING_DIR / f"{p}.yaml"  # a bare name refers to serving/<name>.yaml
    try:
        cfg = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"serving config not found: {path}") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{p}: serving config must be a mapping")
    unknown = set(cfg) - TOP_KEYS
    if unknown:
        raise ValueError(f"{p}: unknown top-level keys {sorted(unknown)} (vLLM options go under 'vllm:')")
    if not isinstance(cfg.get("model"), str) or not cfg["model"]:
        raise ValueError(f"{p}: key 'model' must be a non-empty string")
    for key in ("capaudit", "vllm"):
        if cfg.get(key) is not None and not isinstance(cfg[key], dict):
            raise ValueError(f"{p}: key '{key}' must be a mapping")
    for flag in (cfg.get("vllm") or {}):
        if not isinstance(flag, str) or not FLAG_RE.match(flag):
            raise ValueError(f"{p}: vllm option {flag!r} must be lower-case with dashes (e.g. max-model-len)")
        if flag in MANAGED_FLAGS:
            raise ValueError(f"{p}: vllm option {flag!r} is set at the top level, not under 'vllm:'")
    cfg["_path"] = str(p)
    return cfg


def _is_local(model: str) -> bool:
    return model.startswith(("/", ".", "~", "$")) or os.path.exists(model)


def _flag_words(flag: str, value: Any) -> List[str]:
    if value is None:
        return []
    if value is True:
        return [f"--{flag}"]
    if value is False:
        return [f"--no-{flag}"]
    if isinstance(value, (dict, list)):
        return [f"--{flag}", canonical(value)]
    return [f"--{flag}", str(value)]


def build_serve_command(
    config: Mapping[str, Any] | str | Path,
    host: Optional[str] = None,
    port: Optional[int] = None,
    model: Optional[str] = None,
    overrides: Optional[Mapping[str, Any]] = None,
    python: Optional[str] = None,
    vllm: Optional[str] = None,
) -> ServeCommand:
    """The serve command for a config (a path, a ``serving/`` name, or a loaded mapping).

    ``host``/``port``/``model`` override the config; ``overrides`` sets vLLM options (``None``
    removes one). ``python`` fills the ``{python}`` placeholder (default ``$CAPAUDIT_VLLM_PYTHON``
    or ``python``), ``vllm`` the ``{vllm}`` one (default: ``vllm`` beside that python when it
    exists, else ``vllm``).
    """
    cfg = load_serving_config(config) if isinstance(config, (str, Path)) else dict(config)
    where = cfg.get("_path", "<config>")
    meta = cfg.get("capaudit") or {}
    model_id = expand(model or cfg["model"])
    revision = cfg.get("revision")
    if revision is not None and not REVISION_RE.match(str(revision)):
        raise ValueError(f"{where}: key 'revision' must be a 40-hex commit, got {revision!r}")
    if revision is None and not _is_local(model_id) and not meta.get("unpinned_reason"):
        raise ValueError(f"{where}: HF model {model_id!r} needs a pinned 'revision' (or capaudit.unpinned_reason)")
    py = python or os.environ.get("CAPAUDIT_VLLM_PYTHON") or "python"
    if vllm is None:
        beside = Path(py).parent / "vllm"
        vllm = str(beside) if (os.sep in py and beside.exists()) else "vllm"
    launcher = meta.get("launcher") or ["{vllm}", "serve"]
    if isinstance(launcher, str):
        launcher = shlex.split(launcher)
    argv = [str(w).replace("{python}", py).replace("{vllm}", vllm) for w in launcher]
    model_flag = meta.get("model_flag")
    argv += [model_flag, model_id] if model_flag else [model_id]
    if revision is not None and not (model and _is_local(model_id)):
        argv += ["--revision", str(revision)]
    argv += ["--host", str(host or cfg.get("host") or "127.0.0.1")]
    argv += ["--port", str(int(port if port is not None else cfg.get("port") or 8000))]
    flags: Dict[str, Any] = dict(cfg.get("vllm") or {})
    for k, v in (overrides or {}).items():
        if not FLAG_RE.match(k) or k in MANAGED_FLAGS:
            raise ValueError(f"override {k!r}: not a vllm option name (use --host/--port/--model for those)")
        flags[k] = v
    for flag, value in flags.items():
        argv += _flag_words(flag, value)
    env = {str(k): expand(str(v)) for k, v in (meta.get("env") or {}).items()}
    served = str(flags.get("served-model-name") or model_id)
    warns = []
    if revision is None and not _is_local(model_id):
        warns.append(f"{model_id} is not pinned to a revision: {meta.get('unpinned_reason')}")
    return ServeCommand(argv=argv, env=env, name=str(meta.get("name") or Path(where).stem), model=model_id,
                        revision=revision, served_model_name=served, warnings=warns)


def parse_override(text: str) -> tuple:
    """``key=value`` (value parsed as YAML: numbers, true/false, null, JSON) → ``(key, value)``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE")
    return key.strip(), yaml.safe_load(value) if value != "" else ""


def list_configs(directory: Optional[str | Path] = None) -> List[Path]:
    """Serving configs shipped in ``serving/``."""
    d = Path(directory) if directory else SERVING_DIR
    return sorted(d.glob("*.yaml"))


__all__ = ["ServeCommand", "build_serve_command", "load_serving_config", "parse_override", "list_configs", "expand",
           "SERVING_DIR"]
