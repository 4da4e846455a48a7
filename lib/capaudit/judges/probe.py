"""Yes-bias probe: do the judges say "yes" to claims that are false by construction?

SugarCrepe pairs a COCO caption with a hard negative that adds, replaces or swaps one object,
attribute or relation (seven perturbation types). On the judged slice both captions of every pair
whose image is in COCO-MINI are extracted and judged like any surface. A claim of the negative
caption whose key ``category|normalize(unit)|normalize(target)`` (§4.4 normalisation) is not a
claim of its positive caption appears **only in the negative** and is false by construction (the
negative differs from a true caption in exactly that claim). Per judge and perturbation type (and
all types pooled) the probe reports

* ``false_yes`` = yes / n over those negative-only claims, and
* ``true_yes`` = yes / n over the claims of the positive captions,

each with a 95 % percentile interval from a pair-cluster bootstrap
(:func:`capaudit.stats.bootstrap.cluster_bootstrap`; ``reps`` resamples of whole pairs, ``seed``).
Only pairs whose both captions were judged by every judge count. Nothing here is specific to
the offline judges: pointed at a VLM endpoint (a judge with ``url``), the same probe measures it.

Params ``judges.probe``: ``{slice, positive, negative, reps: 2000, seed: 0}``. Outputs:
``artifacts/judges/yes_bias_probe.json``, the table's rows ``artifacts/tables/yes_bias_probe.json`` (the
paper renders them), ``numbers/probe.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.results import StageResult

ALL_TYPES = "all"


@dataclass(frozen=True)
class ProbeRow:
    """One (judge, perturbation type) row of the probe."""

    judge: str
    judge_label: str
    backend: str
    perturbation: str
    pairs: int
    negative_only_claims: int
    false_yes: float
    false_yes_lower: float
    false_yes_upper: float
    positive_claims: int
    true_yes: float
    true_yes_lower: float
    true_yes_upper: float

    @property
    def gap(self) -> float:
        return self.true_yes - self.false_yes


def claim_key(category: str, unit: str, target: str) -> str:
    """``category|normalize(unit)|normalize(target)`` (§4.4)."""
    from capaudit.claims.summarize import normalize_unit

    return f"{category}|{normalize_unit(unit)}|{normalize_unit(target)}"


def probe_records(judged: Iterable[Mapping[str, Any]], captions: Iterable[Mapping[str, Any]], positive: str,
                  negative: str) -> Tuple[List[str], List[Dict[str, Any]]]:
    """``(judges, records)``: one record per judged claim of a complete pair,
    ``{pair_id, perturbation, kind: positive|negative_only, answers: {judge: answer}}``."""
    pair_of: Dict[str, Tuple[str, str]] = {}
    for c in captions:
        if c.get("surface") in (positive, negative) and c.get("pair_id"):
            pair_of[str(c["caption_id"])] = (str(c["pair_id"]), str(c.get("perturbation", "")))
    by_pair: Dict[str, Dict[str, List[Mapping[str, Any]]]] = {}
    judges: List[str] = []
    for r in judged:
        if r.get("surface") not in (positive, negative):
            continue
        hit = pair_of.get(str(r.get("caption_id")))
        if hit is None:
            continue
        judges = judges or list(r.get("judges") or [])
        side = "pos" if r["surface"] == positive else "neg"
        by_pair.setdefault(hit[0], {"pos": [], "neg": [], "type": [hit[1]]})[side].append(r)  # type: ignore[dict-item]
    records: List[Dict[str, Any]] = []
    for pid in sorted(by_pair):
        sides = by_pair[pid]
        if not sides["pos"] or not sides["neg"]:
            continue
        ptype = sides["type"][0]  # type: ignore[index]
        pos_keys = {claim_key(r["category"], r["unit"], r["target"]) for r in sides["pos"]}
        for r in sides["pos"]:
            records.append({"pair_id": pid, "perturbation": ptype, "kind": "positive", "answers": dict(r["answers"])})
        for r in sides["neg"]:
            if claim_key(r["category"], r["unit"], r["target"]) not in pos_keys:
                records.append({"pair_id": pid, "perturbation": ptype, "kind": "negative_only",
                                "answers": dict(r["answers"])})
    return judges, records


def _rate(records: Sequence[Tuple[str, str]]) -> float:
    return sum(1 for _, a in records if a == "yes") / len(records) if records else 0.0


def _interval(records: List[Tuple[str, str]], reps: int, seed: int) -> Tuple[float, float, float]:
    """(estimate, lower, upper) of the yes rate with a pair-cluster bootstrap."""
    from capaudit.stats.bootstrap import cluster_bootstrap

    if not records:
        return 0.0, 0.0, 0.0
    if len({p for p, _ in records}) < 2:
        est = _rate(records)
        return est, est, est
    b = cluster_bootstrap(records, [p for p, _ in records], _rate, n_resamples=reps, seed=seed)  # type: ignore[arg-type]
    return b.estimate, b.lower, b.upper


def probe_rows(judges: Sequence[str], records: Sequence[Mapping[str, Any]], labels: Mapping[str, Tuple[str, str]],
               reps: int = 2000, seed: int = 0, types: Optional[Sequence[str]] = None) -> List[ProbeRow]:
    """Rows per judge × perturbation type (types in ``types`` order, then ``all``)."""
    from .slices import SUGARCREPE_TYPES

    order = [t for t in (types or SUGARCREPE_TYPES) if any(r["perturbation"] == t for r in records)] + [ALL_TYPES]
    out = []
    for j in judges:
        label, backend = labels.get(j, (j, "model"))
        for t in order:
            sel = [r for r in records if t == ALL_TYPES or r["perturbation"] == t]
            neg = [(r["pair_id"], r["answers"].get(j)) for r in sel if r["kind"] == "negative_only"]
            pos = [(r["pair_id"], r["answers"].get(j)) for r in sel if r["kind"] == "positive"]
            fy, fl, fu = _interval(neg, reps, seed)
            ty, tl, tu = _interval(pos, reps, seed)
            out.append(ProbeRow(j, label, backend, t, len({r["pair_id"] for r in sel}), len(neg), fy, fl, fu,
                                len(pos), ty, tl, tu))
    return out


def write_probe_rows(rows: Sequence[ProbeRow], artifacts: Path, inputs: Sequence[str] = (),
                     kinds: Optional[Mapping[str, Sequence[str]]] = None) -> Path:
    """The probe table's rows ``artifacts/tables/yes_bias_probe.json`` (``paper.tables_probe`` renders
    them): every :class:`ProbeRow` field and the gap, and which judges are offline heuristics."""
    from capaudit.summaries.table_rows import write_table_rows

    return write_table_rows(artifacts, "yes_bias_probe", "judges", [{**asdict(r), "gap": r.gap} for r in rows],
                            function=f"{__name__}.probe_rows", inputs=inputs,
                            meta={"offline_judges": sorted({r.judge for r in rows if r.backend == "offline"}),
                                  "judge_kinds": {j: list(k) for j, k in sorted((kinds or {}).items())}})


def probe_numbers(rows: Sequence[ProbeRow], judges: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """The probe's quoted numbers (fragment ``probe``); judges are lettered A, B, … in order."""
    total = [r for r in rows if r.perturbation == ALL_TYPES]
    numbers: Dict[str, Dict[str, Any]] = {
        "ProbePairs": {"value": total[0].pairs if total else 0, "format": "int",
                       "description": "SugarCrepe pairs on COCO-MINI with both captions judged"},
    }
    for i, j in enumerate(judges):
        letter = "ABCDEFGH"[i] if i < 8 else "Z"
        r = next(x for x in total if x.judge == j)
        numbers[f"ProbeFalseYesJudge{letter}"] = {"value": r.false_yes, "format": "num:2",
                                                   "description": f"false-yes rate on negative-only claims, {r.judge_label}"}
        numbers[f"ProbeTrueYesJudge{letter}"] = {"value": r.true_yes, "format": "num:2",
                                                  "description": f"yes rate on true claims, {r.judge_label}"}
        numbers[f"ProbeNegOnlyJudge{letter}"] = {"value": r.negative_only_claims, "format": "int",
                                                  "description": f"negative-only claims judged, {r.judge_label}"}
    return numbers


def read_jsonl(path: Path) -> List[Dict[str, Any]]:
    if not Path(path).is_file():
        raise InputError("file not found (run the judges stage first: notebook 05_judges)", path=path)
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass(frozen=True, eq=False)
class ProbeResult(StageResult):
    """What :func:`run` wrote: the probe rows (and as a frame), the rows file, the SugarCrepe records."""

    rows: List[ProbeRow]
    table: Any
    paths: Dict[str, Any]
    records: List[Any]


def run(cfg: Any) -> ProbeResult:
    """Notebook 05b: the probe over the judges stage's outputs (module docstring)."""
    import pandas as pd

    from capaudit.summaries.numbers_fragments import write_numbers_fragment
    from capaudit.summaries.vqa_layout import read_vqa_layout

    from .params import YesBiasProbeParams
    from .stage_params import slug

    p = YesBiasProbeParams.from_section(cfg.section("judges"), cfg.path)
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "judges"
    sdir = art / slug(p.slice)
    layout = read_vqa_layout(art / "vqa_layout.json")
    labels = {j.name: (j.label, j.backend) for j in layout.judges}
    judges, records = probe_records(read_jsonl(sdir / "judged_claims.jsonl"), read_jsonl(sdir / "captions.jsonl"),
                                    p.positive, p.negative)
    if not records:
        raise InputError(f"no complete SugarCrepe pair among the judged claims of slice {p.slice!r} "
                         f"(surfaces {p.positive!r}, {p.negative!r})", path=sdir / "judged_claims.jsonl")
    rows = probe_rows(judges, records, labels, p.reps, p.seed)
    frame = pd.DataFrame([{**asdict(r), "gap": r.gap} for r in rows])
    rows_path = write_probe_rows(rows, dirs["artifacts"], inputs=[str(sdir / "judged_claims.jsonl"),
                                                                  str(sdir / "captions.jsonl")],
                                 kinds={j.name: j.kinds for j in layout.judges})  # who answered, as recorded
    write_json_atomic(art / "yes_bias_probe.json", {"params": dict(p.written), "judges": judges,
                                                    "rows": [asdict(r) for r in rows], "records": len(records)})
    numbers = probe_numbers(rows, judges)
    write_numbers_fragment(dirs["artifacts"], "probe", numbers, backend=", ".join(l for l, _ in labels.values()))
    return ProbeResult(rows, frame, {"rows": rows_path}, records)


__all__ = ["ProbeResult", "ProbeRow", "claim_key", "probe_records", "probe_rows", "write_probe_rows", "probe_numbers", "run"]
