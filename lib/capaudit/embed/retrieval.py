"""Image–text retrieval margins of CLIP / LongCLIP (reference-spec §8.2).

Captions and images are aligned by row (caption i describes image i). Per row i, with cosines of
L2-normalised embeddings:

* ``pos`` = cos(img_i, txt_i);
* ``i2t_margin`` = pos − max_{j≠i} cos(img_i, txt_j); ``t2i_margin`` = pos − max_{j≠i} cos(img_j, txt_i);
* rank = 1 + #{j≠i: sim > pos} per direction; R@1 / R@5 = share of rows with rank ≤ 1 / ≤ 5.

Means come with 1000-replicate bootstrap percentile intervals from **one**
``np.random.default_rng(seed)`` shared across pos, i2t margin and t2i margin (in that order).
Token lengths are counted untruncated with special tokens: ``trunc_gt_248`` = share longer than
``max_length`` (column name fixed, as in the reference), ``tok_mean``, ``tok_p95`` (numpy linear
percentile, as in the reference TSVs).

Scorers: :func:`load_hf_clip` (transformers ``CLIPModel`` from a local folder; LongCLIP checkpoints
in HF format work with ``max_length=248``), :func:`load_open_clip` (``open_clip``, imported lazily),
and :func:`random_tiny_clip` — a tiny **randomly initialised** ``CLIPModel`` that exercises the code
path offline; its numbers measure nothing and every output says so (``random_init: true``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from capaudit.embed.encoders import EncoderUnavailable, _version, weights_revision
from capaudit.embed.metrics import l2_normalize
from capaudit.errors import InputError

#: OpenAI CLIP image normalisation.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
SOT, EOT = 49406, 49407
RANDOM_TINY_CLIP = "capaudit-random-tiny-clip"
TSV_COLUMNS = ("surface", "rows", "trunc_gt_248", "tok_mean", "tok_p95", "pos_mean", "pos_ci95", "i2t_margin_mean",
               "i2t_margin_ci95", "i2t_r1", "i2t_r5", "t2i_margin_mean", "t2i_margin_ci95", "t2i_r1", "t2i_r5")


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise EncoderUnavailable("CLIP retrieval needs torch: .venv/bin/pip install torch==2.13.0 (CPU) "
                                 "then pip install transformers") from None
    return torch


def preprocess_image(path: str, size: int, mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD
                     ) -> np.ndarray:
    """CLIP preprocessing: RGB, resize the short side to ``size`` (bicubic), centre crop, normalise → CHW float32."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            scale = size / min(w, h)
            im = im.resize((max(size, round(w * scale)), max(size, round(h * scale))), Image.BICUBIC)
            w, h = im.size
            left, top = (w - size) // 2, (h - size) // 2
            im = im.crop((left, top, left + size, top + size))
            a = np.asarray(im, dtype=np.float32) / 255.0
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read image ({exc})", path=path) from None
    a = (a - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return a.transpose(2, 0, 1)


@dataclass
class ClipScorer:
    """Image and text encoders of one CLIP-family model (texts truncated at ``max_length``)."""

    name: str
    revision: str
    backend: str
    max_length: int
    encode_images_fn: Callable[[Sequence[str]], np.ndarray] = field(repr=False)
    encode_texts_fn: Callable[[Sequence[str]], np.ndarray] = field(repr=False)
    count_tokens_fn: Callable[[Sequence[str]], np.ndarray] = field(repr=False)
    random_init: bool = False
    info: Dict[str, Any] = field(default_factory=dict)

    def encode_images(self, paths: Sequence[str]) -> np.ndarray:
        return l2_normalize(self.encode_images_fn(list(paths)))

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        return l2_normalize(self.encode_texts_fn(list(texts)))

    def count_tokens(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.count_tokens_fn(list(texts)), dtype=np.int64)

    def describe(self) -> Dict[str, Any]:
        d = {"name": self.name, "revision": self.revision, "backend": self.backend, "max_length": self.max_length,
             "random_init": self.random_init, **self.info}
        if self.random_init:
            d["warning"] = ("randomly initialised model: these numbers exercise the code path and measure "
                            "nothing about the captions")
        return d


def clip_bpe_counter() -> Any:
    """The CLIP BPE counter of :mod:`capaudit.text.truncation` (open_clip cleaning)."""
    from capaudit.text.truncation import ClipBpeCounter, resolve_encoder

    return ClipBpeCounter(resolve_encoder("clip77", clean="open_clip"))


def clip_bpe_batch(texts: Sequence[str], max_length: int, counter: Any = None) -> Tuple[np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask)`` of CLIP BPE with open_clip cleaning and truncation (SOT + first L−2 + EOT)."""
    counter = counter or clip_bpe_counter()
    ids = np.zeros((len(texts), max_length), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, t in enumerate(texts):
        seq = [SOT] + counter.ids(t)[: max_length - 2] + [EOT]
        ids[i, :len(seq)] = seq
        mask[i, :len(seq)] = 1
    return ids, mask


def hf_clip_scorer(model: Any, *, name: str, revision: str, max_length: int, image_size: int,
               mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD, tokenizer: Any = None,
               batch_size: int = 32, random_init: bool = False, backend: Optional[str] = None,
               info: Optional[Dict[str, Any]] = None) -> ClipScorer:
    """A :class:`ClipScorer` around a transformers ``CLIPModel`` instance (trained, or built in a test).

    ``tokenizer`` is a transformers tokenizer; None uses the CLIP BPE (instant-clip-tokenizer) with
    open_clip cleaning and truncation. ``random_init=True`` marks every output as a code-path check.
    """
    torch = _torch()
    model = model.eval()
    bpe = clip_bpe_counter() if tokenizer is None else None

    def features(out: Any) -> np.ndarray:
        t = out if hasattr(out, "detach") else out.pooler_output  # transformers 4 returns a tensor, 5 an output
        return t.detach().float().cpu().numpy()

    def enc_images(paths: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for s in range(0, len(paths), batch_size):
                px = np.stack([preprocess_image(p, image_size, mean, std) for p in paths[s:s + batch_size]])
                out.append(features(model.get_image_features(pixel_values=torch.from_numpy(px))))
        return np.concatenate(out) if out else np.zeros((0, model.config.projection_dim), np.float32)

    def tokenize(texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        if tokenizer is None:
            return clip_bpe_batch(texts, max_length, bpe)
        enc = tokenizer(list(texts), padding="max_length", truncation=True, max_length=max_length)
        return np.asarray(enc["input_ids"], dtype=np.int64), np.asarray(enc["attention_mask"], dtype=np.int64)

    def enc_texts(texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for s in range(0, len(texts), batch_size):
                ids, mask = tokenize(texts[s:s + batch_size])
                out.append(features(model.get_text_features(input_ids=torch.from_numpy(ids),
                                                            attention_mask=torch.from_numpy(mask))))
        return np.concatenate(out) if out else np.zeros((0, model.config.projection_dim), np.float32)

    def count(texts: Sequence[str]) -> np.ndarray:
        if tokenizer is None:
            return bpe.count(texts)
        return np.asarray([len(x) for x in tokenizer(list(texts), add_special_tokens=True,
                                                     truncation=False)["input_ids"]])

    return ClipScorer(name=name, revision=revision, backend=backend or f"transformers {_version('transformers')} "
                      f"CLIPModel", max_length=max_length, encode_images_fn=enc_images, encode_texts_fn=enc_texts,
                      count_tokens_fn=count, random_init=random_init, info=dict(info or {}))


def random_tiny_clip(seed: int = 0, max_length: int = 77, image_size: int = 32, width: int = 32,
                     layers: int = 2, projection_dim: int = 16) -> ClipScorer:
    """A tiny **randomly initialised** transformers ``CLIPModel`` with the CLIP BPE vocabulary (49,408).

    Offline stand-in for a trained CLIP / LongCLIP (``max_length=248``): same code path, meaningless
    numbers (``random_init=True`` in every output).
    """
    torch = _torch()
    try:
        from transformers import CLIPConfig, CLIPModel
    except ImportError:
        raise EncoderUnavailable("the CLIP code path needs transformers: pip install transformers") from None
    cfg = CLIPConfig(
        text_config=dict(vocab_size=49408, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                         num_attention_heads=2, max_position_embeddings=max_length, bos_token_id=SOT,
                         eos_token_id=EOT, pad_token_id=0, projection_dim=projection_dim),
        vision_config=dict(hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                           num_attention_heads=2, image_size=image_size, patch_size=max(1, image_size // 4),
                           projection_dim=projection_dim),
        projection_dim=projection_dim)
    gen_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = CLIPModel(cfg)
    finally:
        torch.random.set_rng_state(gen_state)  # leave torch's global generator as it was
    return hf_clip_scorer(model, name=RANDOM_TINY_CLIP, revision=f"random-init-seed{seed}", max_length=max_length,
                      image_size=image_size, random_init=True,
                      backend=f"transformers {_version('transformers')} CLIPModel, random init (seed {seed}), "
                              f"CLIP BPE via instant-clip-tokenizer",
                      info={"config": {"width": width, "layers": layers, "image_size": image_size,
                                       "projection_dim": projection_dim}})


def load_hf_clip(path: str, max_length: Optional[int] = None, batch_size: int = 32) -> ClipScorer:
    """A Hugging Face ``CLIPModel`` from a local folder (its own tokenizer when the folder has one)."""
    _torch()
    try:
        from transformers import AutoTokenizer, CLIPModel
    except ImportError:
        raise EncoderUnavailable("the Hugging Face CLIP loader needs transformers: pip install transformers") from None
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise InputError("not a Hugging Face model folder (no config.json)", path=folder)
    model = CLIPModel.from_pretrained(str(folder), local_files_only=True)
    positions = int(model.config.text_config.max_position_embeddings)
    limit = int(max_length or positions)
    if limit > positions:
        raise InputError(f"max_length {limit} exceeds the model's {positions} text positions", path=folder)
    tokenizer = None
    if any((folder / f).is_file() for f in ("tokenizer.json", "vocab.json")):
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    size, mean, std = int(model.config.vision_config.image_size), CLIP_MEAN, CLIP_STD
    pre = folder / "preprocessor_config.json"
    if pre.is_file():
        cfg = json.loads(pre.read_text(encoding="utf-8"))
        mean, std = cfg.get("image_mean", mean), cfg.get("image_std", std)
    return hf_clip_scorer(model, name=str(path), revision=weights_revision(folder), max_length=limit, image_size=size,
                      mean=mean, std=std, tokenizer=tokenizer, batch_size=batch_size,
                      info={"tokenizer": "model folder" if tokenizer else "CLIP BPE (instant-clip-tokenizer)"})


def load_open_clip(model_name: str, pretrained: Optional[str] = None, max_length: Optional[int] = None,
                   batch_size: int = 32) -> ClipScorer:
    """An ``open_clip`` model (``pretrained`` = tag or local checkpoint file); open_clip is imported lazily."""
    torch = _torch()
    try:
        import open_clip
    except ImportError:
        raise EncoderUnavailable("the open_clip loader needs open_clip_torch: pip install open_clip_torch (it pulls "
                                 "torchvision and a CUDA torch build, ~6 GB; use a HF-format checkpoint with "
                                 "load_hf_clip to avoid it)") from None
    model, _, preprocess = open_clip.create_model_and_transforms(model_name, pretrained=pretrained)
    model.eval()
    tok = open_clip.get_tokenizer(model_name)
    limit = int(max_length or getattr(tok, "context_length", 77) or 77)
    simple = getattr(tok, "encode", None)
    bpe = clip_bpe_counter() if simple is None else None

    def enc_images(paths: Sequence[str]) -> np.ndarray:
        from PIL import Image

        out = []
        with torch.inference_mode():
            for s in range(0, len(paths), batch_size):
                px = torch.stack([preprocess(Image.open(p).convert("RGB")) for p in paths[s:s + batch_size]])
                out.append(model.encode_image(px).float().cpu().numpy())
        return np.concatenate(out)

    def enc_texts(texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for s in range(0, len(texts), batch_size):
                out.append(model.encode_text(tok(list(texts[s:s + batch_size]), context_length=limit)).float().cpu().numpy())
        return np.concatenate(out)

    def count(texts: Sequence[str]) -> np.ndarray:
        if simple is None:
            return bpe.count(texts)
        return np.asarray([len(simple(t)) + 2 for t in texts])

    revision = str(pretrained) if pretrained else "random-init"
    if pretrained and Path(str(pretrained)).is_file():
        from capaudit.io.manifest import sha256_of

        revision = "sha256:" + sha256_of(pretrained)
    return ClipScorer(name=f"open_clip:{model_name}", revision=revision, backend=f"open_clip {_version('open_clip_torch')}",
                      max_length=limit, encode_images_fn=enc_images, encode_texts_fn=enc_texts, count_tokens_fn=count,
                      random_init=not pretrained)


def load_clip_scorer(model: str, max_length: Optional[int] = None, seed: int = 0) -> ClipScorer:
    """``capaudit-random-tiny-clip``, ``open_clip:NAME[:PRETRAINED]`` or a local HF CLIP folder."""
    if model == RANDOM_TINY_CLIP:
        return random_tiny_clip(seed=seed, max_length=max_length or 77)
    if model.startswith("open_clip:"):
        parts = model.split(":", 2)
        return load_open_clip(parts[1], parts[2] if len(parts) > 2 else None, max_length)
    return load_hf_clip(model, max_length)


# --- metrics --------------------------------------------------------------------------------------

def _pair_stats(img: np.ndarray, txt: np.ndarray, block: int) -> Dict[str, np.ndarray]:
    n = img.shape[0]
    pos = np.einsum("ij,ij->i", img.astype(np.float64), txt.astype(np.float64))
    i2t_best = np.empty(n)
    t2i_best = np.empty(n)
    i2t_rank = np.empty(n, dtype=np.int64)
    t2i_rank = np.empty(n, dtype=np.int64)
    img64, txt64 = img.astype(np.float64), txt.astype(np.float64)
    for s in range(0, n, block):
        e = min(s + block, n)
        rows = np.arange(s, e)
        for sims, best, rank in ((img64[s:e] @ txt64.T, i2t_best, i2t_rank),   # image i vs all texts
                                 (txt64[s:e] @ img64.T, t2i_best, t2i_rank)):  # text i vs all images
            p = pos[s:e]
            sims[np.arange(e - s), rows] = -np.inf  # j ≠ i
            best[s:e] = sims.max(axis=1) if n > 1 else np.nan
            rank[s:e] = 1 + (sims > p[:, None]).sum(axis=1)
    return {"pos": pos, "i2t_margin": pos - i2t_best, "t2i_margin": pos - t2i_best,
            "i2t_rank": i2t_rank, "t2i_rank": t2i_rank}


def bootstrap_mean_ci(values: np.ndarray, rng: np.random.Generator, reps: int) -> List[float]:
    """Percentile 95 % interval of the mean over ``reps`` resamples drawn from ``rng`` (advances it)."""
    n = values.shape[0]
    means = np.array([values[rng.integers(0, n, n)].mean() for _ in range(reps)])
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def retrieval_margins(image_emb: Any, text_emb: Any, *, reps: int = 1000, seed: int = 0, block: int = 512,
                      token_counts: Optional[Sequence[int]] = None, max_length: int = 248) -> Dict[str, Any]:
    """Retrieval margins and recalls of row-aligned image/text embeddings (module docstring, spec §8.2)."""
    img = l2_normalize(np.asarray(image_emb, dtype=np.float32))
    txt = l2_normalize(np.asarray(text_emb, dtype=np.float32))
    if img.shape != txt.shape or img.ndim != 2:
        raise ValueError(f"retrieval: image and text embeddings must be aligned (n × d), got {img.shape} and {txt.shape}")
    n = img.shape[0]
    if n < 2:
        raise ValueError(f"retrieval: need at least 2 aligned rows, got {n}")
    st = _pair_stats(img, txt, block)
    rng = np.random.default_rng(seed)  # one generator shared across the three intervals, in this order
    out: Dict[str, Any] = {"rows": n}
    if token_counts is not None:
        tc = np.asarray(token_counts, dtype=np.int64)
        if tc.shape[0] != n:
            raise ValueError(f"retrieval: {tc.shape[0]} token counts for {n} rows")
        out.update({"trunc_gt_248": float(np.mean(tc > max_length)), "tok_mean": float(tc.mean()),
                    "tok_p95": float(np.percentile(tc, 95)), "max_length": int(max_length)})
    for key in ("pos", "i2t_margin", "t2i_margin"):
        out[f"{key}_mean"] = float(st[key].mean())
        out[f"{key}_ci95"] = bootstrap_mean_ci(st[key], rng, reps) if reps > 0 else None
    for d in ("i2t", "t2i"):
        out[f"{d}_r1"] = float(np.mean(st[f"{d}_rank"] <= 1))
        out[f"{d}_r5"] = float(np.mean(st[f"{d}_rank"] <= 5))
    out.update({"reps": reps, "seed": seed})
    return out


def tsv_row(surface: str, r: Dict[str, Any]) -> Dict[str, str]:
    """One row of the reference's retrieval TSV (§8.2 columns and number formats)."""
    def ci(v: Optional[List[float]]) -> str:
        return "" if v is None else f"[{v[0]:.6f},{v[1]:.6f}]"

    return {"surface": surface, "rows": str(r["rows"]), "trunc_gt_248": f"{r.get('trunc_gt_248', float('nan')):.4f}",
            "tok_mean": f"{r.get('tok_mean', float('nan')):.2f}", "tok_p95": f"{r.get('tok_p95', float('nan')):.1f}",
            "pos_mean": f"{r['pos_mean']:.6f}", "pos_ci95": ci(r["pos_ci95"]),
            "i2t_margin_mean": f"{r['i2t_margin_mean']:.6f}", "i2t_margin_ci95": ci(r["i2t_margin_ci95"]),
            "i2t_r1": f"{r['i2t_r1']:.4f}", "i2t_r5": f"{r['i2t_r5']:.4f}",
            "t2i_margin_mean": f"{r['t2i_margin_mean']:.6f}", "t2i_margin_ci95": ci(r["t2i_margin_ci95"]),
            "t2i_r1": f"{r['t2i_r1']:.4f}", "t2i_r5": f"{r['t2i_r5']:.4f}"}


def score_surfaces(scorer: ClipScorer, image_paths: Sequence[str], surfaces: Dict[str, Sequence[str]], *,
                   reps: int = 1000, seed: int = 0, block: int = 512) -> Dict[str, Any]:
    """Margins of each caption surface against the same images (rows aligned by index, spec §8.2)."""
    n = len(image_paths)
    for name, caps in surfaces.items():
        if len(caps) != n:
            raise InputError(f"surface {name!r} has {len(caps)} captions for {n} images (rows must align)",
                             field=name)
    img = scorer.encode_images(image_paths)
    out: Dict[str, Any] = {"model": scorer.describe(), "images": n, "surfaces": {}}
    for name, caps in surfaces.items():
        txt = scorer.encode_texts(caps)
        out["surfaces"][name] = retrieval_margins(img, txt, reps=reps, seed=seed, block=block,
                                                  token_counts=scorer.count_tokens(caps),
                                                  max_length=scorer.max_length)
    return out


def coco_mini_pairs(caption_rank: int = 0) -> List[Dict[str, Any]]:
    """COCO-MINI images (by id) with their ``caption_rank``-th human caption (captions ordered by annotation id)."""
    from capaudit.data.coco import coco_mini

    if caption_rank < 0:
        raise InputError("caption_rank must be >= 0", field="caption_rank")
    out = []
    for im in sorted(coco_mini(), key=lambda x: x.id):
        caps = sorted(im.captions, key=lambda c: int(c["id"]))
        if caption_rank < len(caps) and im.path:
            out.append({"image_id": im.id, "image_path": str(im.path), "caption": str(caps[caption_rank]["caption"]).strip()})
    return out


__all__ = ["CLIP_MEAN", "CLIP_STD", "ClipScorer", "RANDOM_TINY_CLIP", "TSV_COLUMNS", "bootstrap_mean_ci",
           "clip_bpe_batch", "clip_bpe_counter", "coco_mini_pairs", "hf_clip_scorer", "load_clip_scorer", "load_hf_clip", "load_open_clip",
           "preprocess_image", "random_tiny_clip", "retrieval_margins", "score_surfaces", "tsv_row"]
