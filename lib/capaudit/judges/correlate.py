"""Judge item scores against human ratings (``capaudit judges correlate``).

Human ratings (``--human``):

* a CSV with ``t2i_model, item_id, answer`` (DSG's ``tifa160-likert-anns.csv``: one row per
  rating, 1–5 Likert; other columns are ignored);
* TIFA's ``human_annotations.json`` (``{"<text_id>_<model>": {"text_id", "human_scores": [..]}}``;
  group = the key after ``<text_id>_``).

The human score of an image is the mean of its ratings. The images compared are those **rated**:
an image with ratings but no answered item score is *missing* — ``--missing zero`` scores it 0
(DSG's scripts: an image with no VQA answer scores 0), ``--missing skip`` leaves it out; either
way the missing images are counted and named. A group of the ratings with fewer than three
answered images is refused (a misspelt model name must not pool its zeros). Duplicate ratings
(the same ``worker_id`` twice for one image, when the CSV has that column) are refused. Scored images without ratings are counted
(``not_rated``) and left out.

Spearman's ρ and Kendall's τ-b (scipy.stats ``spearmanr``/``kendalltau``, as DSG's
``compute_correlation``) with their p-values, and BCa bootstrap intervals over images
(``scipy.stats.bootstrap``, paired resampling, ``reps`` resamples, seeded; Spearman's statistic
vectorised over resamples, :func:`_spearman_along`); per group the same statistics (intervals with
``group_intervals``).
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import InputError

from .item_scores import ItemScore

PathLike = Union[str, Path]
MISSING = ("zero", "skip")
LIKERT_RANGE = (1.0, 5.0)


@dataclass(frozen=True)
class HumanRating:
    """The ratings of one image."""

    group: str
    item_id: str
    ratings: Tuple[float, ...]

    @property
    def mean(self) -> float:
        return float(np.mean(self.ratings))


def _rating(value: Any, path: Path, line: Optional[int], where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"rating {value!r} is not a number", path=path, line=line, field=where) from None
    if not math.isfinite(v) or not LIKERT_RANGE[0] <= v <= LIKERT_RANGE[1]:
        raise InputError(f"rating {value!r} is outside {LIKERT_RANGE[0]:g}..{LIKERT_RANGE[1]:g}", path=path,
                         line=line, field=where)
    return v


def read_human_ratings(path: PathLike) -> List[HumanRating]:
    """Ratings per image from a DSG-style CSV or TIFA's JSON (module docstring), in file order."""
    p = Path(path)
    if not p.is_file():
        raise InputError("human ratings file not found", path=p)
    acc: "OrderedDict[Tuple[str, str], List[float]]" = OrderedDict()
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise InputError(f"not a JSON file ({e})", path=p) from None
        if not isinstance(data, dict) or not data:
            raise InputError("expected TIFA's object of '<text_id>_<model>' entries", path=p)
        for key, d in data.items():
            if not isinstance(d, dict) or not isinstance(d.get("text_id"), str) or not isinstance(d.get("human_scores"), list):
                raise InputError("expected {text_id, human_scores: [...]}", path=p, field=key)
            tid = d["text_id"]
            if not key.startswith(tid + "_"):
                raise InputError(f"key does not start with its text_id {tid!r}", path=p, field=key)
            if not d["human_scores"]:
                raise InputError("no rating", path=p, field=f"{key}.human_scores")
            acc.setdefault((key[len(tid) + 1:], tid), []).extend(
                _rating(v, p, None, f"{key}.human_scores") for v in d["human_scores"])
    else:
        try:
            with open(p, newline="", encoding="utf-8-sig") as fh:
                reader = csv.DictReader(fh)
                workers: set = set()
                missing = [c for c in ("t2i_model", "item_id", "answer") if c not in (reader.fieldnames or [])]
                if missing:
                    raise InputError(f"missing column(s) {missing}", path=p, line=1)
                for row in reader:
                    line = reader.line_num
                    group, item = (row.get("t2i_model") or "").strip(), (row.get("item_id") or "").strip()
                    if not group or not item:
                        raise InputError("empty t2i_model or item_id", path=p, line=line)
                    worker = (row.get("worker_id") or "").strip()
                    if worker:
                        if (group, item, worker) in workers:
                            raise InputError(f"worker {worker!r} rates image ({group}, {item}) twice", path=p,
                                             line=line, field="worker_id")
                        workers.add((group, item, worker))
                    acc.setdefault((group, item), []).append(_rating(row.get("answer"), p, line, "answer"))
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8 text ({e.reason})", path=p) from None
    if not acc:
        raise InputError("no ratings", path=p)
    return [HumanRating(g, i, tuple(v)) for (g, i), v in acc.items()]


@dataclass
class Pairs:
    """Judge score and human mean per compared image, and what was left out."""

    keys: List[Tuple[str, str]]
    judge: np.ndarray
    human: np.ndarray
    missing: List[Tuple[str, str]]
    not_rated: int


def pair_up(scores: Sequence[ItemScore], human: Sequence[HumanRating], missing: str) -> Pairs:
    """Join on (group, item id) over the rated images (module docstring)."""
    if missing not in MISSING:
        raise InputError(f"--missing {missing!r}: expected one of {list(MISSING)}", field="--missing")
    by_key = {(s.group, s.item_id): s for s in scores}
    keys, j, h, miss = [], [], [], []
    for r in human:
        s = by_key.get((r.group, r.item_id))
        if s is None or not s.answered:
            miss.append((r.group, r.item_id))
            if missing == "skip":
                continue
            value = 0.0
        else:
            value = float(s.score)  # type: ignore[arg-type]
        keys.append((r.group, r.item_id))
        j.append(value)
        h.append(r.mean)
    rated = {(r.group, r.item_id) for r in human}
    not_rated = sum(1 for k in by_key if k not in rated)
    answered = len(human) - len(miss)
    if answered < 3:  # with --missing zero the rest would be zeros made from no answer
        raise InputError(f"only {answered} image(s) have both a judge score and ratings (need 3); check that the "
                         "store's groups and item ids match the ratings'")
    per_group: Dict[str, List[int]] = OrderedDict()
    for r in human:
        per_group.setdefault(r.group, [0, 0])[0] += 1
    for g, _ in miss:
        per_group[g][1] += 1
    thin = {g: n - m for g, (n, m) in per_group.items() if n - m < 3}
    if thin:  # a whole group missing (a misspelt model name) would pool its zeros or vanish unnoticed
        raise InputError("group(s) of the ratings with fewer than 3 answered images: "
                         + ", ".join(f"{g} ({k} of {per_group[g][0]})" for g, k in thin.items())
                         + "; check that the store's groups and item ids match the ratings'")
    return Pairs(keys, np.asarray(j, dtype=float), np.asarray(h, dtype=float), miss, not_rated)


def _stat(which: str, x: np.ndarray, y: np.ndarray) -> Tuple[float, float]:
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a constant input: the statistic is nan, reported as null
        res = stats.spearmanr(x, y) if which == "spearman" else stats.kendalltau(x, y)
    return float(res.statistic), float(res.pvalue)


def _spearman_along(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's ρ along ``axis`` (Pearson of average ranks, as ``spearmanr``): the bootstrap's
    vectorised statistic."""
    from scipy.stats import rankdata

    rx, ry = rankdata(x, axis=axis), rankdata(y, axis=axis)
    rx = rx - rx.mean(axis=axis, keepdims=True)
    ry = ry - ry.mean(axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=axis) / np.sqrt((rx * rx).sum(axis=axis) * (ry * ry).sum(axis=axis))


def _interval(which: str, x: np.ndarray, y: np.ndarray, reps: int, seed: int, level: float) -> Optional[List[float]]:
    from scipy import stats

    def kendall(a: np.ndarray, b: np.ndarray) -> float:
        return _stat("kendall", a, b)[0]

    vectorised = which == "spearman"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((x, y), _spearman_along if vectorised else kendall, paired=True, vectorized=vectorised,
                              n_resamples=reps, confidence_level=level, method="BCa",
                              rng=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return [lo, hi] if math.isfinite(lo) and math.isfinite(hi) else None


def _finite(v: float) -> Optional[float]:
    return v if math.isfinite(v) else None


def correlation(x: np.ndarray, y: np.ndarray, reps: int, seed: int, level: float) -> Dict[str, Any]:
    """Spearman and Kendall with p-values and bootstrap intervals (``reps`` = 0: no interval)."""
    out: Dict[str, Any] = {"n": int(len(x))}
    for which in ("spearman", "kendall"):
        s, p = _stat(which, x, y)
        out[which] = _finite(s)
        out[f"{which}_p"] = _finite(p)
        out[f"{which}_ci"] = _interval(which, x, y, reps, seed, level) if reps and out[which] is not None else None
    return out


def correlate(scores: Sequence[ItemScore], human: Sequence[HumanRating], *, missing: str, reps: int = 2000,
              seed: int = 0, level: float = 0.95, group_intervals: bool = False) -> Dict[str, Any]:
    """The ``CORR.json`` object (module docstring); top level pools every group; per group the
    statistics and p-values (and, with ``group_intervals``, bootstrap intervals)."""
    pairs = pair_up(scores, human, missing)
    out = correlation(pairs.judge, pairs.human, reps, seed, level)
    groups: Dict[str, Any] = {}
    names = list(OrderedDict.fromkeys(g for g, _ in pairs.keys))
    garr = np.array([g for g, _ in pairs.keys])
    for g in names:
        sel = garr == g
        groups[g] = correlation(pairs.judge[sel], pairs.human[sel], reps if group_intervals else 0, seed, level) \
            if sel.sum() >= 3 else {"n": int(sel.sum()), "spearman": None, "kendall": None}
    out.update({"level": level, "bootstrap": {"method": "BCa", "resamples": reps, "seed": seed, "unit": "image"},
                "missing": {"policy": missing, "count": len(pairs.missing),
                            "images": [{"group": g, "item_id": i} for g, i in pairs.missing]},
                "not_rated": pairs.not_rated, "groups": groups})
    return out


__all__ = ["HumanRating", "read_human_ratings", "Pairs", "pair_up", "correlation", "correlate", "MISSING"]
