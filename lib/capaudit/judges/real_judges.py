"""Stage "real judges, real people" (notebook 12): published VQA answers and human ratings.

From the DSG release (``../shared/data/dsg``, checksummed through the data registry):

1. every answers file is imported (``judges import``) into ``artifacts/real_judges/stores``;
2. the DSG README's tables are recomputed (:mod:`.dsg_reproduction`);
3. the three VQA models' agreement on the DSG questions (``judges cells`` over the 1,695 answered
   images, dependency off): exact, Fleiss' κ, AC1, Krippendorff's α per question category;
4. yes / no / uncertain rates per judge and DSG question category;
5. calibration with human labels (:mod:`.calibrate`): coverage and width of the PPI++ and
   human-only intervals over random labelled subsets of each size, per text-to-image model.

Writes ``artifacts/real_judges/summary.json``; ``capaudit.paper.real_judges`` renders it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, List, Mapping

from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.summaries.numbers_fragments import write_numbers_fragment

from .answers import ANSWER_NAMES, iter_request_rows
from .releases import store_paths

DEFAULTS: Dict[str, Any] = {
    "judges": {"mplug-large": "mplug", "instruct-blip": "instructblip", "pali-17b": "pali17b"},
    "correlation_reps": 2000,
    "seed": 0,
    "calibration": {"judge": "pali-17b", "dependency": True, "ns": [20, 50, 100], "subsets": 1000, "level": 0.95,
                    "labelled": 50},
}
SUMMARY = "summary.json"


def settings(cfg: Any) -> Dict[str, Any]:
    """The ``real_judges`` section of a params file over :data:`DEFAULTS`."""
    raw = cfg.raw.get("real_judges") or {}
    if not isinstance(raw, Mapping):
        raise InputError("real_judges must be a mapping", path=cfg.path, field="real_judges")
    out = json.loads(json.dumps(DEFAULTS))
    for k, v in raw.items():
        if k not in out:
            raise InputError(f"unknown key {k!r} (known: {sorted(out)})", path=cfg.path, field=f"real_judges.{k}")
        out[k] = {**out[k], **v} if isinstance(out[k], dict) and isinstance(v, Mapping) else v
    return out


def dsg_dir() -> Path:
    """The DSG release folder, every file used checked against the registry's sha256."""
    from capaudit.data.registry import fetch_many

    files = ["data/dsg-1k-anns.csv", "data/tifa160-likert-anns.csv"] + [
        f"vqa_answers_release/{v}_{q}.csv" for v in ("mplug", "instructblip", "pali17b") for q in ("dsg", "tifa", "vq2a")]
    paths = fetch_many("dsg", files)
    return Path(paths[0]).parents[1]


def yes_rates(stores: Mapping[str, Path]) -> List[Dict[str, Any]]:
    """Per judge and DSG broad category (entity, attribute, relation, global, other): answer counts
    and rates over the answered questions of the import (unrecognised answers count as uncertain)."""
    rows = []
    for judge, store in stores.items():
        rq, rs = store_paths(store)
        cats = {r["request_id"]: [c.split("/")[0] or "uncategorised" for c in r["meta"]["release_categories"]]
                for r in iter_request_rows([rq])}
        counts: Dict[str, Dict[str, int]] = OrderedDict()
        with open(rs, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                for cat, res in zip(cats[row["request_id"]], row["parsed"]["question_results"]):
                    c = counts.setdefault(cat, dict.fromkeys(ANSWER_NAMES, 0))
                    c[res["answer"]] += 1
        total = dict.fromkeys(ANSWER_NAMES, 0)
        for cat in sorted(counts):
            c = counts[cat]
            n = sum(c.values())
            rows.append({"judge": judge, "category": cat, "questions": n, **c,
                         **{f"{a}_rate": c[a] / n for a in ANSWER_NAMES}})
            for a in ANSWER_NAMES:
                total[a] += c[a]
        n = sum(total.values())
        rows.append({"judge": judge, "category": "__all__", "questions": n, **total,
                     **{f"{a}_rate": total[a] / n for a in ANSWER_NAMES}})
    return rows


def run(cfg: Any) -> Dict[str, Any]:
    """Notebook 12: the whole stage (module docstring); returns the summary."""
    from .dsg_reproduction import correlation_rows, dsg1k_rows

    s = settings(cfg)
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "real_judges"
    work = art / "stores"
    d = dsg_dir()
    corr = correlation_rows(d, work, reps=int(s["correlation_reps"]), seed=int(s["seed"]))
    dsg1k = dsg1k_rows(d, work)
    stores = OrderedDict((j, work / f"{f}_dsg") for j, f in s["judges"].items())
    summary: Dict[str, Any] = {
        "source": "DSG release (j-min/DSG, commit 7330119a): VQA answers of mPLUG-large, InstructBLIP and PaLI-17B; "
                  "TIFA160 1-5 Likert ratings (5 raters per image)",
        "settings": s, "reproduction": {"correlation": corr, "dsg1k": dsg1k},
        "imports": {j: json.loads((p / "import.json").read_text(encoding="utf-8")) for j, p in stores.items()},
        "yes_rates": yes_rates(stores),
        "agreement": agreement(stores, art, int(s["seed"])),
        "calibration": calibration(stores[s["calibration"]["judge"]], d, s),
    }
    for imp in summary["imports"].values():  # keep the summary small: the stores have the details
        imp.pop("not_yes_no_uncertain", None)
    write_json_atomic(art / SUMMARY, summary)
    write_numbers_fragment(dirs["artifacts"], "real_judges", numbers(summary), backend=BACKEND)
    return summary


BACKEND = "published VQA answers and human Likert ratings (DSG release); no model run"


def numbers(summary: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The numbers the section's prose quotes (``\\ca<Name>``)."""
    corr, dsg1k = summary["reproduction"]["correlation"], summary["reproduction"]["dsg1k"]
    possible = 2 * sum(r["reproducible"] for r in corr) + len(dsg1k)
    equal = 2 * sum(r["equal"] for r in corr) + sum(r["equal"] for r in dsg1k)
    cov = summary["calibration"]["coverage"]
    lo, hi = min(r["ppi_coverage"] for r in cov), max(r["ppi_coverage"] for r in cov)
    rw = [1 - r["relative_width"] for r in cov]
    bias = [r["judge_estimate"] - r["truth"] for r in cov]

    def n(value: Any, fmt: str, what: str) -> Dict[str, Any]:
        return {"value": value, "format": fmt, "description": what}

    return {
        "RealReproduced": n(equal, "int", "published DSG numbers recomputed equal at the printed rounding"),
        "RealReproducible": n(possible, "int", "published DSG numbers our data allows recomputing"),
        "RealCoverageMin": n(lo, "pct:1", "lowest PPI++ coverage over models and n"),
        "RealCoverageMax": n(hi, "pct:1", "highest PPI++ coverage over models and n"),
        "RealNarrowerMin": n(min(rw), "pct:0", "smallest width saving of PPI++ over human only"),
        "RealNarrowerMax": n(max(rw), "pct:0", "largest width saving of PPI++ over human only"),
        "RealJudgeBiasMin": n(min(bias), "num:2", "smallest overestimate of the judge-only mean rating"),
        "RealJudgeBiasMax": n(max(bias), "num:2", "largest overestimate of the judge-only mean rating"),
    }


def agreement(stores: Mapping[str, Path], art: Path, seed: int) -> Dict[str, Any]:
    """``judges cells`` over the judges' DSG imports (dependency off); the cells file is kept."""
    from capaudit.summaries.cells import format_cells

    from .cells import cells_from_answers, load_slice
    from capaudit.io.atomic import write_text_atomic

    judges = [(j, [store_paths(p)[1]]) for j, p in stores.items()]
    index, answers = load_slice(judges, [store_paths(p)[0] for p in stores.values()])
    cells, report = cells_from_answers("dsg", list(stores), index, answers, 200, seed)
    text = format_cells(cells)
    write_text_atomic(art / "cells.json", text)
    d = json.loads(text)
    return {"images": report["__intersection__"]["captions"], "pairwise": d.get("judge_agreement", {}),
            "all_judges": d.get("judges_agreement", {})}


def calibration(store: Path, dsg: Path, s: Mapping[str, Any]) -> Dict[str, Any]:
    """Coverage study and one example draw (:mod:`.calibrate`)."""
    from .calibrate import calibrate, coverage_table
    from .correlate import read_human_ratings
    from .item_scores import item_scores

    c = s["calibration"]
    rq, rs = store_paths(store)
    scores = item_scores([rq], [rs], dependency=bool(c["dependency"]), dsg_script_quirks=bool(c["dependency"])).rows
    human = read_human_ratings(dsg / "data" / "tifa160-likert-anns.csv")
    return {"judge": c["judge"], "dependency": bool(c["dependency"]),
            "coverage": coverage_table(scores, human, ns=c["ns"], subsets=int(c["subsets"]), seed=int(s["seed"]),
                                       level=float(c["level"])),
            "example": calibrate(scores, human, labelled=int(c["labelled"]), seed=int(s["seed"]),
                                 level=float(c["level"]))}


__all__ = ["BACKEND", "numbers", "DEFAULTS", "settings", "dsg_dir", "yes_rates", "agreement", "calibration", "run"]
