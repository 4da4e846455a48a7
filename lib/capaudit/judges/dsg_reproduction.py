"""Recompute the DSG release's published tables from its answers (``capaudit/data/dsg_published.yaml``).

1. **Human correlation on TIFA160**: for each VQA model (mPLUG-large, InstructBLIP, PaLI-17B) and
   question set (TIFA, VQ², DSG with and without dependency), Spearman and Kendall of the item
   score against the mean Likert rating over the 800 images. Imported with ``judges import``,
   scored with ``judges item-scores``, compared with ``judges correlate --missing zero`` — DSG's
   convention for ``tifa160_134``, which has no DSG answer — and, for the DSG rows, the released
   scripts' dependency quirk (:mod:`.dependency`). The TIFA rows need TIFA's multiple-choice answer
   key, which our data lacks: they are computed (yes counts as correct) and marked not reproducible.
2. **DSG-1k on SD2.1 with PaLI-17B**: the mean item score (dependency on) per prompt category, in
   percent; an image with no answer scores 0 as in the scripts.

A published value is *reproduced* when ours, rounded as the README prints it, is equal.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Dict, List, Union

import numpy as np
import yaml

from .correlate import correlate, read_human_ratings
from .item_scores import item_scores
from .releases import import_release, store_paths

PathLike = Union[str, Path]
QUESTION_SETS = ("tifa", "vq2a", "dsg", "dsg_no_dependency")


@lru_cache(maxsize=1)
def published() -> Dict[str, Any]:
    """The published numbers (``capaudit/data/dsg_published.yaml``)."""
    return yaml.safe_load(resources.files("capaudit.data").joinpath("dsg_published.yaml").read_text(encoding="utf-8"))


def _store(dsg_dir: Path, work: Path, vqa_file: str, qset: str) -> Path:
    stem = f"{vqa_file}_{'dsg' if qset.startswith('dsg') else qset}"
    out = work / stem
    if not (out / "import.json").is_file():
        import_release("dsg", dsg_dir / "vqa_answers_release" / f"{stem}.csv", vqa_file, out,
                       questions=dsg_dir / "data" / "dsg-1k-anns.csv" if qset.startswith("dsg") else None)
    return out


def correlation_rows(dsg_dir: PathLike, work: PathLike, reps: int = 0, seed: int = 0) -> List[Dict[str, Any]]:
    """One row per (VQA model, question set): published and recomputed Spearman/Kendall."""
    dsg_dir, work = Path(dsg_dir), Path(work)
    pub = published()
    human = read_human_ratings(dsg_dir / "data" / "tifa160-likert-anns.csv")
    rows = []
    for vqa, sets in pub["tifa160_correlation"].items():
        vfile = pub["vqa_files"][vqa]
        for qset in QUESTION_SETS:
            rq, rs = store_paths(_store(dsg_dir, work, vfile, qset))
            dep = qset == "dsg"
            scores = item_scores([rq], [rs], dependency=dep, dsg_script_quirks=dep)
            c = correlate(scores.rows, human, missing="zero", reps=reps, seed=seed)
            p = sets[qset]
            reproducible = qset not in pub["not_reproducible"]
            rows.append({
                "vqa": vqa, "question_set": qset, "n": c["n"], "missing": c["missing"]["count"],
                "published_spearman": p["spearman"], "spearman": c["spearman"], "spearman_p": c["spearman_p"],
                "spearman_ci": c.get("spearman_ci"),
                "published_kendall": p["kendall"], "kendall": c["kendall"], "kendall_p": c["kendall_p"],
                "kendall_ci": c.get("kendall_ci"),
                "reproducible": reproducible,
                "equal": reproducible and round(c["spearman"], 3) == p["spearman"]
                and round(c["kendall"], 3) == p["kendall"] and c["n"] == p["n"],
                "why_not": None if reproducible else " ".join(pub["not_reproducible"][qset].split()),
            })
    return rows


def _category(item_id: str, prefixes: Dict[str, List[str]]) -> str:
    split = item_id.rsplit("_", 1)[0]
    for cat, pre in prefixes.items():
        if split in pre:
            return cat
    raise ValueError(f"item {item_id!r}: no DSG-1k category for prefix {split!r}")


def dsg1k_rows(dsg_dir: PathLike, work: PathLike) -> List[Dict[str, Any]]:
    """PaLI-17B's DSG-1k average on SD2.1 per prompt category, published and recomputed (percent)."""
    spec = published()["dsg1k_sd2dot1_pali17b"]
    rq, rs = store_paths(_store(Path(dsg_dir), Path(work), "pali17b", "dsg"))
    scores = item_scores([rq], [rs], dependency=True, dsg_script_quirks=True)
    prefixes = {c: v["prefixes"] for c, v in spec["categories"].items() if v["prefixes"]}
    by: Dict[str, List[float]] = {c: [] for c in spec["categories"]}
    unanswered: Dict[str, int] = {c: 0 for c in spec["categories"]}
    for r in scores.rows:
        if r.group != spec["t2i_model"]:
            continue
        value = r.score if r.answered else 0.0  # the scripts' convention for an image with no answer
        for cat in (_category(r.item_id, prefixes), "all"):
            by[cat].append(float(value))
            unanswered[cat] += 0 if r.answered else 1
    rows = []
    for cat, p in spec["categories"].items():
        ours = 100 * float(np.mean(by[cat]))
        rows.append({"category": cat, "published_items": p["items"], "items": len(by[cat]),
                     "unanswered_scored_zero": unanswered[cat], "published_score": p["score"], "score": ours,
                     "equal": round(ours, 1) == p["score"] and len(by[cat]) == p["items"]})
    return rows


__all__ = ["QUESTION_SETS", "published", "correlation_rows", "dsg1k_rows"]
