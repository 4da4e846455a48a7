"""Correct a judge's estimate with a few human labels (``capaudit judges calibrate``).

Target, per group (text-to-image model): the mean over **all** its rated images of the per-image
mean rating. The judge's item score is known for every image; human ratings may be used for
``labelled`` images per group, drawn at random without replacement (``numpy.random.default_rng(seed)``,
groups in the ratings file's order, ``rng.choice(N, n, replace=False)`` per group). Three
estimates (:mod:`capaudit.stats.calibration`), each with a ``level`` interval:

* ``ppi``: prediction-powered inference, tuned (PPI++), finite-population form (FPC);
* ``human_only``: the labelled images' mean (FPC);
* ``judge_only``: the judge's census mapped linearly onto the rating scale (1 + 4·score for
  1–5 Likert); no sampling error, so no interval width — its error is the judge's bias.

An image with ratings but no judge answer stays in the population (the target is the mean over
*all* rated images, and its ratings may be drawn) with the predictor value 0 (DSG's convention;
PPI stays unbiased whatever the predictor), counted per group (``unanswered``); a group with fewer
than two answered images is refused.

``check`` holds what a real study would not have — the all-ratings mean and whether each interval
covers it — because the ratings file here holds every image's ratings.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from capaudit.errors import InputError
from capaudit.stats.calibration import coverage_study, human_only_mean, judge_only_mean, ppi_mean

from .correlate import LIKERT_RANGE, HumanRating
from .item_scores import ItemScore


@dataclass
class Population:
    """One group's images: human mean ``y`` and judge score ``f`` per image."""

    group: str
    y: np.ndarray
    f: np.ndarray
    unanswered: int


def populations(scores: Sequence[ItemScore], human: Sequence[HumanRating]) -> "OrderedDict[str, Population]":
    """Per group (ratings file order): the rated images with their judge score (module docstring)."""
    by_key = {(s.group, s.item_id): s for s in scores}
    acc: "OrderedDict[str, Tuple[List[float], List[float], int]]" = OrderedDict()
    for r in human:
        ys, fs, un = acc.setdefault(r.group, ([], [], 0))
        s = by_key.get((r.group, r.item_id))
        if s is None or not s.answered or s.score is None:
            acc[r.group] = (ys, fs, un + 1)
            fs.append(0.0)
        else:
            fs.append(float(s.score))  # type: ignore[arg-type]
        ys.append(r.mean)
    out: "OrderedDict[str, Population]" = OrderedDict()
    for g, (ys, fs, un) in acc.items():
        if len(fs) - un < 2:
            raise InputError(f"group {g!r}: fewer than 2 rated images have a judge score; check that the store's "
                             "groups and item ids match the ratings'")
        out[g] = Population(g, np.asarray(ys, dtype=float), np.asarray(fs, dtype=float), un)
    return out


def calibrate(scores: Sequence[ItemScore], human: Sequence[HumanRating], *, labelled: int, seed: int,
              level: float = 0.95) -> Dict[str, Any]:
    """The ``CAL.json`` object (module docstring)."""
    pops = populations(scores, human)
    small = {g: len(p.y) for g, p in pops.items() if labelled >= len(p.y)}
    if labelled < 2 or small:
        raise InputError(f"--labelled {labelled}: needs 2 <= N < the images of every group "
                         f"({', '.join(f'{g}: {n}' for g, n in small.items()) or 'N < 2'})", field="--labelled")
    rng = np.random.default_rng(seed)
    groups: Dict[str, Any] = OrderedDict()
    for g, p in pops.items():
        n_all = len(p.y)
        idx = rng.choice(n_all, size=labelled, replace=False)
        y_l, f_l = p.y[idx], p.f[idx]
        est = {"ppi": ppi_mean(y_l, f_l, p.f, level=level, population=n_all),
               "human_only": human_only_mean(y_l, level=level, population=n_all),
               "judge_only": judge_only_mean(p.f, scale=LIKERT_RANGE)}
        truth = float(p.y.mean())
        groups[g] = {**{k: v.to_dict() for k, v in est.items()},
                     "images": n_all, "labelled": labelled, "unanswered": p.unanswered,
                     "check": {"all_ratings_mean": truth,
                               "covered": {k: bool(v.lo <= truth <= v.hi) for k, v in est.items()}}}
    return {"groups": groups, "level": level, "labelled": labelled, "seed": seed,
            "unanswered_images": "judge score 0 (kept in the population)", "estimator": "PPI++ mean (tuned lambda), finite-population correction",
            "target": "mean over all rated images of the group of the per-image mean rating"}


def coverage_table(scores: Sequence[ItemScore], human: Sequence[HumanRating], *, ns: Sequence[int], subsets: int,
                   seed: int, level: float = 0.95) -> List[Dict[str, Any]]:
    """Per group and n: coverage and mean width of each interval over ``subsets`` random subsets."""
    rows: List[Dict[str, Any]] = []
    for g, p in populations(scores, human).items():
        for r in coverage_study(p.y, p.f, ns=tuple(int(n) for n in ns), subsets=subsets, seed=seed, level=level,
                                scale=LIKERT_RANGE):
            rows.append({"group": g, "images": len(p.y), "unanswered": p.unanswered, **r.to_dict()})
    return rows


__all__ = ["Population", "populations", "calibrate", "coverage_table"]
