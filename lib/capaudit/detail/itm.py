"""Image–text matching (ITM) scorers behind one interface (issue 13, "Selection").

A scorer has a ``name`` (written into every output) and ``score(images, captions, graphs=None) ->
[float | None]`` (``None``: no score for that pair, e.g. a missing image).

* :class:`AnnotationPrecisionScorer` — ``annotation-precision``, an **offline, CHAIR-style
  stand-in** for a learned ITM model: the share of the caption's objects that ground in the
  image's annotations. Over the distinct vocabulary entries (COCO categories, through the
  lexicon) of the caption's objects, ``precision = |entries present in the image| / |entries|``
  (= 1 − CHAIR_i per caption); objects outside the vocabulary are ignored, as in CHAIR. ``None``
  when the image has no grounding source or the caption names no vocabulary object.
* :class:`CLIPScorer` — cosine similarity of CLIP-family image and text embeddings, for users with
  weights: :meth:`CLIPScorer.from_transformers` (Hugging Face ``CLIPModel`` + ``CLIPProcessor``,
  a local directory or hub name) or :meth:`CLIPScorer.from_open_clip` (``open_clip``). ``torch``,
  ``transformers`` and ``open_clip`` are imported only when such a scorer is built. No weights
  ship here (offline-backends §1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional, Protocol, Sequence, Union

import numpy as np

from .graph import SceneGraph

ANNOTATION_PRECISION_NAME = "annotation-precision"
ANNOTATION_PRECISION_LABEL = "annotation-precision (CHAIR-style share of grounded objects; offline ITM stand-in)"
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ITMScorer(Protocol):
    name: str
    label: str

    def score(self, images: Sequence[Any], captions: Sequence[str],
              graphs: Optional[Sequence[Optional[SceneGraph]]] = None) -> List[Optional[float]]:
        ...


class AnnotationPrecisionScorer:
    """Offline CHAIR-style ITM stand-in (module docstring).

    ``grounding``: a grounding backend (:mod:`capaudit.detail.grounding`); ``parser``: builds graphs
    when ``score`` gets none (default: the offline scene-graph parser)."""

    name = ANNOTATION_PRECISION_NAME
    label = ANNOTATION_PRECISION_LABEL

    def __init__(self, grounding: Any, parser: Any = None):
        self.grounding = grounding
        self._parser = parser

    def score_graph(self, graph: Optional[SceneGraph], grounded: Any) -> Optional[float]:
        """Precision of one caption's objects against one grounded image."""
        if graph is None or grounded is None:
            return None
        entries = {}
        for name in graph.objects:
            cat = grounded.category_of(name)
            if cat is not None and cat not in entries:
                entries[cat] = name
        if not entries:
            return None
        hits = sum(1 for name in entries.values() if grounded.grounds(name))
        return hits / len(entries)

    def score(self, images: Sequence[Any], captions: Sequence[str],
              graphs: Optional[Sequence[Optional[SceneGraph]]] = None) -> List[Optional[float]]:
        if len(images) != len(captions):
            raise ValueError(f"{len(images)} images but {len(captions)} captions")
        if graphs is None:
            if self._parser is None:
                from .parser_factory import offline_parser

                self._parser = offline_parser()
            graphs = [r.graph for r in self._parser.parse_many(list(captions))]
        if self.grounding is None:
            return [None] * len(images)
        return [self.score_graph(g, self.grounding.ground(im)) for im, g in zip(images, graphs)]


# -- CLIP family ----------------------------------------------------------------------------------
def clip_preprocess(images: Sequence[Any], size: int, mean: Sequence[float] = CLIP_MEAN,
                    std: Sequence[float] = CLIP_STD) -> np.ndarray:
    """CLIP's image transform in numpy: RGB, bicubic resize of the short side to ``size``, centre
    crop ``size``², scale to [0, 1], normalise; returns ``(N, 3, size, size)`` float32."""
    from PIL import Image

    out = np.empty((len(images), 3, size, size), dtype=np.float32)
    for i, im in enumerate(images):
        im = im.convert("RGB")
        w, h = im.size
        s = size / min(w, h)
        nw, nh = max(size, round(w * s)), max(size, round(h * s))
        im = im.resize((nw, nh), Image.BICUBIC)
        left, top = (nw - size) // 2, (nh - size) // 2
        arr = np.asarray(im.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
        out[i] = ((arr - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)).transpose(2, 0, 1)
    return out


class CLIPScorer:
    """Cosine similarity of image and text embeddings (module docstring).

    ``encode_images(list of PIL images) -> (N, D)`` and ``encode_texts(list of str) -> (N, D)``
    return array-likes (torch tensors are converted); use the ``from_*`` constructors for real
    models. ``image_root`` resolves relative image paths; a missing image scores ``None``."""

    def __init__(self, encode_images: Callable[[List[Any]], Any], encode_texts: Callable[[List[str]], Any],
                 name: str, batch_size: int = 32, image_root: Optional[Union[str, Path]] = None):
        self.encode_images = encode_images
        self.encode_texts = encode_texts
        self.name = name
        self.label = f"{name} (CLIP-family ITM, cosine similarity)"
        self.batch_size = int(batch_size)
        self.image_root = Path(image_root) if image_root else None

    # -- constructors ------------------------------------------------------------------------------
    @classmethod
    def from_transformers(cls, model: Any, processor: Any = None, name: Optional[str] = None, device: str = "cpu",
                          tokenize: Optional[Callable[[List[str]], Any]] = None,
                          preprocess: Optional[Callable[[List[Any]], Any]] = None, **kwargs: Any) -> "CLIPScorer":
        """A Hugging Face ``CLIPModel`` (or a path/hub name loaded with ``from_pretrained``).

        ``processor`` (default ``CLIPProcessor.from_pretrained`` of the same path) tokenises and
        preprocesses; ``tokenize`` / ``preprocess`` override either part (e.g. for a random-init
        model without tokenizer files)."""
        import torch
        from transformers import CLIPModel

        label = name or (str(model) if isinstance(model, (str, Path)) else "transformers-clip")
        if isinstance(model, (str, Path)):
            if processor is None and (tokenize is None or preprocess is None):
                from transformers import CLIPProcessor

                processor = CLIPProcessor.from_pretrained(str(model))
            model = CLIPModel.from_pretrained(str(model))
        model = model.to(device).eval()
        size = int(model.config.vision_config.image_size)
        max_len = int(model.config.text_config.max_position_embeddings)

        def _tok(texts: List[str]) -> Any:
            if tokenize is not None:
                return tokenize(texts)
            return processor(text=texts, return_tensors="pt", padding=True, truncation=True, max_length=max_len)

        def _pre(images: List[Any]) -> Any:
            if preprocess is not None:
                return preprocess(images)
            if processor is not None:
                return processor(images=images, return_tensors="pt")["pixel_values"]
            return clip_preprocess(images, size)

        def enc_img(images: List[Any]) -> Any:
            px = _pre(images)
            if not torch.is_tensor(px):
                px = torch.as_tensor(np.asarray(px))
            with torch.no_grad():
                return _features(model.get_image_features(pixel_values=px.to(device)))

        def enc_txt(texts: List[str]) -> Any:
            tok = _tok(texts)
            tok = {k: torch.as_tensor(v).to(device) for k, v in dict(tok).items()}
            with torch.no_grad():
                return _features(model.get_text_features(**tok))

        return cls(enc_img, enc_txt, label, **kwargs)

    @classmethod
    def from_open_clip(cls, arch: str, pretrained: Optional[str] = None, device: str = "cpu",
                       name: Optional[str] = None, **kwargs: Any) -> "CLIPScorer":
        """An ``open_clip`` model: ``arch`` (e.g. ``ViT-B-32``) with ``pretrained`` (a tag or a local
        checkpoint path; ``None`` = random weights)."""
        import open_clip  # noqa: F401 - optional dependency, imported only here
        import torch

        model, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=pretrained)
        tokenizer = open_clip.get_tokenizer(arch)
        model = model.to(device).eval()

        def enc_img(images: List[Any]) -> Any:
            with torch.no_grad():
                return model.encode_image(torch.stack([preprocess(im.convert("RGB")) for im in images]).to(device))

        def enc_txt(texts: List[str]) -> Any:
            with torch.no_grad():
                return model.encode_text(tokenizer(texts).to(device))

        return cls(enc_img, enc_txt, name or f"open_clip:{arch}:{pretrained}", **kwargs)

    # -- scoring -------------------------------------------------------------------------------------
    def _path(self, image: Any) -> Optional[Path]:
        if image is None or not str(image).strip():
            return None
        p = Path(str(image))
        if not p.is_absolute() and self.image_root is not None:
            p = self.image_root / p
        return p if p.is_file() else None

    def score(self, images: Sequence[Any], captions: Sequence[str],
              graphs: Optional[Sequence[Optional[SceneGraph]]] = None) -> List[Optional[float]]:
        from PIL import Image

        if len(images) != len(captions):
            raise ValueError(f"{len(images)} images but {len(captions)} captions")
        out: List[Optional[float]] = [None] * len(images)
        ok = [(i, p) for i, p in ((i, self._path(im)) for i, im in enumerate(images)) if p is not None]
        for start in range(0, len(ok), self.batch_size):
            batch = ok[start:start + self.batch_size]
            pil = []
            for _, p in batch:
                with Image.open(p) as im:
                    pil.append(im.convert("RGB"))
            iv = _unit(np.asarray(_to_numpy(self.encode_images(pil)), dtype=np.float64))
            tv = _unit(np.asarray(_to_numpy(self.encode_texts([captions[i] for i, _ in batch])), dtype=np.float64))
            for (i, _), s in zip(batch, (iv * tv).sum(axis=1)):
                out[i] = float(s)
        return out


def _features(x: Any) -> Any:
    """Embeddings from ``get_*_features`` (a tensor, or a model output with ``pooler_output``)."""
    if hasattr(x, "pooler_output") and not hasattr(x, "shape"):
        return x.pooler_output
    return x


def _to_numpy(x: Any) -> Any:
    if hasattr(x, "detach"):
        return x.detach().cpu().float().numpy()
    return x


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


def make_itm_scorer(spec: Optional[str], grounding: Any = None, parser: Any = None,
                    image_root: Optional[Union[str, Path]] = None) -> Optional[ITMScorer]:
    """A scorer from a CLI/params spec: ``annotation_precision`` | ``clip:PATH_OR_NAME`` (transformers)
    | ``open_clip:ARCH[:PRETRAINED]`` | ``none``/``None``."""
    if spec in (None, "", "none"):
        return None
    kind, _, arg = str(spec).partition(":")
    if kind in ("annotation_precision", "annotation-precision") and not arg:
        if grounding is None:
            raise ValueError("the annotation-precision ITM scorer needs a grounding source")
        return AnnotationPrecisionScorer(grounding, parser)
    if kind == "clip" and arg:
        return CLIPScorer.from_transformers(arg, name=f"clip:{arg}", image_root=image_root)
    if kind == "open_clip" and arg:
        arch, _, pre = arg.partition(":")
        return CLIPScorer.from_open_clip(arch, pre or None, image_root=image_root)
    raise ValueError(f"unknown ITM scorer {spec!r}; expected annotation_precision, clip:PATH, open_clip:ARCH[:PRETRAINED] "
                     "or none")


__all__ = ["ANNOTATION_PRECISION_NAME", "ANNOTATION_PRECISION_LABEL", "ITMScorer", "AnnotationPrecisionScorer",
           "CLIPScorer", "clip_preprocess", "make_itm_scorer"]
