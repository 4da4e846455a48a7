"""Consensus, readiness, status and export of a study (reference-spec §7).

* Consensus per (item, phase, field) over the latest revision of each participant's judgment:
  the adjudicated value if present, else a strict majority of at least two raters (unanimous
  ``uncertain`` kept), else none; hidden repeats are excluded (they measure test–retest consistency).
* Judge–human records: image-phase ``image_support`` consensus rows, weighted by the sampling
  weight, clustered by image (``item_group``), grouped by surface group.
* Export is aggregate-only unless public rows are asked for; public rows carry salted hashed ids and
  an allow-listed column set (no surfaces, judge answers, timestamps or notes). A real study that
  holds simulated judgments is refused.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from capaudit.errors import InputError
from capaudit.io.atomic import check_output_dir, write_json_atomic, write_text_atomic
from capaudit.stats.agreement import (
    ABSTENTIONS, IMAGE_SUPPORT_LABELS, JudgeHumanRecord, binary_agreement, cohen_kappa, consensus, exact_agreement,
    fixed_rater_pairs, fleiss_kappa, gwet_ac1, judge_human_agreement, symmetrized_pairs,
)
from capaudit.summaries.agreement import AgreementInterval, JudgeAgreement, format_agreement

from .claim_display import renders_unit
from .consensus import consensus_rows, labels_by_field, ratings_by_field
from .corrected import CORRECTED_JSON, corrected_payload, corrected_support
from .protocol import ADJUDICABLE_FIELDS, CATEGORIES, PHASE_FIELDS, PHASES, SCALE_FIELDS
from .study import Study

PathLike = Union[str, Path]
SUBSTANTIVE = ("yes", "no")
#: Columns of the public rows export (allow-list).
PUBLIC_COLUMNS = (
    "item_hash", "rater_hash", "phase", "category", "is_repeat", "caption_licensed", "atomic_visual_claim",
    "category_check", "corrected_category", "image_support", "salient_coverage", "control_usefulness",
    "image_unavailable", "confidence", "reason_tags",
)
EXPORT_JSON = "human_study_export.json"
AGREEMENT_JSON = "judge_human_agreement_bootstrap.json"
PUBLIC_CSV = "human_public_rows.csv"


@dataclass(frozen=True)
class Disagreement:
    item_id: str
    phase: str
    field: str
    labels: Tuple[str, ...]


def disagreements(study: Study) -> List[Disagreement]:
    """Fields with the planned number of labels but no consensus and no adjudication."""
    labels = labels_by_field(study)
    adj = study.adjudicated()
    need = study.config.labels_per_item
    out = []
    for (item_id, f), labs in sorted(labels.items()):
        ph = ADJUDICABLE_FIELDS[f]
        if len(labs) >= min(2, need) and (item_id, ph, f) not in adj and consensus(labs) is None:
            out.append(Disagreement(item_id, ph, f, tuple(sorted(labs))))
    return out


def judge_human_records(study: Study) -> List[JudgeHumanRecord]:
    """Image-phase consensus rows with a human label (repeats excluded), in sample order."""
    cons = consensus_rows(study)
    out = []
    for it in study.items():
        if it["repeat_of"] is not None:
            continue
        human = cons.get((it["item_id"], "image_support"))
        if human is None:
            continue
        out.append(JudgeHumanRecord(item_id=it["item_id"], human=human, judges=json.loads(it["judge_answers"]),
                                    weight=float(it["weight"]), cluster=it["item_group"],
                                    surface_group=it["surface_group"]))
    return out


def claims_shown_as_span(study: Study) -> int:
    """Items (repeats aside) whose annotators read the caption span, not the extractor's unit the
    judges were asked about."""
    return sum(not renders_unit(it["unit"], it["span"] or "") for it in study.items() if it["repeat_of"] is None)


def _report_stratum(item: Any) -> str:
    """An item's §7 stratum ``<surface_group>/<category>`` (a design's sub-stratum suffix dropped)."""
    return f"{item['surface_group']}/{item['category']}"


def readiness(study: Study) -> Dict[str, Any]:
    """The §7 readiness thresholds: each check with its value, threshold and whether it is met."""
    r = study.config.readiness
    recs = judge_human_records(study)
    items = {it["item_id"]: it for it in study.items() if it["repeat_of"] is None}
    subst = [x for x in recs if x.human in SUBSTANTIVE]
    per_type = Counter(items[x.item_id]["category"] for x in subst)
    # §7 strata are surface group × claim type, also when the design splits them into sub-strata
    per_stratum = Counter(_report_stratum(items[x.item_id]) for x in subst)
    sampled_types = sorted({it["category"] for it in items.values()}, key=CATEGORIES.index)
    strata = sorted({_report_stratum(it) for it in items.values()})
    judges = study.judges
    covered = sum(all(j in json.loads(it["judge_answers"]) for j in judges) for it in items.values())
    open_dis = len(disagreements(study)) if study.config.adjudication_required else 0
    checks = [
        {"name": "substantive_overall", "value": len(subst), "threshold": r.min_substantive,
         "met": len(subst) >= r.min_substantive},
        {"name": "substantive_per_type", "value": {t: per_type.get(t, 0) for t in sampled_types},
         "threshold": r.min_per_type, "met": bool(sampled_types) and all(per_type.get(t, 0) >= r.min_per_type
                                                                          for t in sampled_types)},
        {"name": "substantive_per_stratum", "value": {s: per_stratum.get(s, 0) for s in strata},
         "threshold": r.min_per_stratum, "met": bool(strata) and all(per_stratum.get(s, 0) >= r.min_per_stratum
                                                                       for s in strata)},
        {"name": "judge_coverage", "value": covered, "threshold": len(items), "met": bool(items) and covered == len(items)},
        {"name": "open_disagreements", "value": open_dis, "threshold": 0, "met": open_dis == 0},
        {"name": "bootstrap", "value": {"n_resamples": r.bootstrap_resamples, "seed": r.bootstrap_seed},
         "threshold": {"n_resamples": 10_000, "seed": 1477},
         "met": r.bootstrap_resamples == 10_000 and r.bootstrap_seed == 1477},
    ]
    missing = study.sample_report().get("missing_strata", [])
    return {"ready": all(c["met"] for c in checks), "checks": checks, "missing_strata": missing}


def _seal_summary(study: Study) -> Optional[Dict[str, Any]]:
    seal = study.launch_seal()
    return None if seal is None else {k: seal[k] for k in ("ethics_id", "participant_info_sha256", "design_sha256",
                                                           "sealed_at")}


def status_report(study: Study) -> Dict[str, Any]:
    """Study state, progress per participant and phase, labels, disagreements, readiness."""
    items = study.items()
    base = [it for it in items if it["repeat_of"] is None]
    parts = study.participants()
    assigned = study.store.read("SELECT participant_id, item_id, phase FROM assignments")
    latest = study.latest_annotations()
    done = {(a["participant_id"], a["item_id"], a["phase"]) for a in latest}
    names = {p["participant_id"]: p["pseudonym"] for p in parts}
    per: Dict[str, List[int]] = {p["pseudonym"]: [0, 0] for p in parts if p["role"] == "annotator"}
    by_phase = {ph: [0, 0] for ph in PHASES}
    for a in assigned:
        key = (a["participant_id"], a["item_id"], a["phase"])
        per.setdefault(names[a["participant_id"]], [0, 0])[1] += 1
        by_phase[a["phase"]][1] += 1
        if key in done:
            per[names[a["participant_id"]]][0] += 1
            by_phase[a["phase"]][0] += 1
    labelled = Counter(a["item_id"] for a in latest if a["phase"] == "image")
    need = study.config.labels_per_item
    n_sim = sum(1 for a in latest if a["simulated"])
    return {
        "study_id": study.study_id, "status": study.status, "mode": study.mode, "db": str(study.path),
        "rehearsal_of": study.rehearsal_of, "launch_seal": _seal_summary(study),
        "items": len(base), "hidden_repeats": len(items) - len(base),
        "strata": len({it["stratum"] for it in base}),
        "participants": dict(Counter(f"{p['kind']}/{p['role']}/{p['status']}" for p in parts)),
        "progress": {"by_phase": {k: {"done": v[0], "assigned": v[1]} for k, v in by_phase.items()},
                     "by_participant": {k: {"done": v[0], "assigned": v[1]} for k, v in sorted(per.items())}},
        "labels": {"items_with_full_image_labels": sum(1 for it in base if labelled[it["item_id"]] >= need),
                   "labels_per_item": need},
        "simulated_judgments": n_sim,
        "open_disagreements": len(disagreements(study)),
        "readiness": readiness(study),
    }


def _hash(salt: str, kind: str, value: str) -> str:
    return hashlib.blake2b(f"{salt}\0{kind}\0{value}".encode("utf-8"), digest_size=12).hexdigest()


def _nominal_block(ratings: Dict[str, Dict[str, str]], labels: Sequence[str]) -> Dict[str, Any]:
    """Pooled exact agreement and AC1 (symmetrized pairs), Cohen's κ (two fixed raters only, else
    ``None``) and Fleiss' κ (any raters) of items with ≥ 2 labels."""
    per_item = {i: list(r.values()) for i, r in ratings.items()}
    a, b = symmetrized_pairs(per_item)
    fixed = fixed_rater_pairs(ratings)
    return {"n": len(a), "exact": exact_agreement(a, b),
            "cohen_kappa": cohen_kappa(fixed[1], fixed[2], labels) if fixed else None,
            "gwet_ac1": gwet_ac1(a, b, labels), "fleiss_kappa": fleiss_kappa(per_item, labels)}


def _binary_block(ratings: Dict[str, Dict[str, str]]) -> Dict[str, Any]:
    """Pooled binary agreement (symmetrized pairs, abstentions dropped) with Cohen's κ of two fixed
    raters (else ``None``) and Fleiss' κ of the yes/no labels of items with ≥ 2 of them."""
    per_item = {i: list(r.values()) for i, r in ratings.items()}
    a, b = symmetrized_pairs(per_item)
    pooled = binary_agreement(a, b)
    fixed = fixed_rater_pairs(ratings)
    kept = {i: [x for x in labs if x not in ABSTENTIONS] for i, labs in per_item.items()}
    kept = {i: labs for i, labs in kept.items() if len(labs) >= 2}
    out = dataclasses.replace(pooled, cohen_kappa=binary_agreement(fixed[1], fixed[2]).cohen_kappa
                              if fixed else None).as_dict(detail=True)
    out["fleiss_kappa"] = fleiss_kappa(kept, SUBSTANTIVE) if kept else None
    return out


def human_human(study: Study) -> Dict[str, Any]:
    """Symmetrized pooled human–human agreement per nominal field (items with ≥ 2 raters).

    ``cohen_kappa`` is Cohen's κ (scikit-learn's, as ``capaudit human agreement``) when the same two
    participants labelled every such item, else ``None`` (Cohen's κ needs two fixed raters);
    ``fleiss_kappa`` is Fleiss' κ, defined for any raters (Scott's π with two raters per item).
    ``raters`` counts the distinct participants; ``n`` counts the symmetrized (ordered) pairs.
    """
    ratings = ratings_by_field(study)
    return {f: field_agreement(ratings[f], f) for f in ADJUDICABLE_FIELDS}


def field_agreement(ratings: Dict[str, Dict[str, str]], field_name: str) -> Dict[str, Any]:
    """Agreement of one nominal field over ``item_id → participant → label`` (items with ≥ 2 raters):
    the nominal block, plus the binary block (positive/negative agreement) for yes/no fields."""
    per_field = {i: r for i, r in ratings.items() if len(r) >= 2}
    n_pairs = sum(len(r) * (len(r) - 1) // 2 for r in per_field.values())
    block: Dict[str, Any] = {"n_items": len(per_field), "n_pairs": n_pairs}
    allowed = PHASE_FIELDS[ADJUDICABLE_FIELDS[field_name]][field_name]
    if field_name in ("caption_licensed", "image_support"):
        if per_field:
            block.update(nominal=_nominal_block(per_field, allowed), binary=_binary_block(per_field))
    else:
        block["nominal"] = _nominal_block(per_field, allowed) if per_field else None
    block["raters"] = len({p for r in per_field.values() for p in r})
    return block


def repeat_consistency(study: Study, field_name: str = "image_support") -> Dict[str, Any]:
    """Test–retest: a participant's label of ``field_name`` on an item vs on its hidden repeat."""
    phase = ADJUDICABLE_FIELDS[field_name]
    items = {it["item_id"]: it for it in study.items()}
    lab = {(a["participant_id"], a["item_id"]): a[field_name] for a in study.latest_annotations()
           if a["phase"] == phase and a[field_name] is not None}
    pairs = [(lab[(p, it["repeat_of"])], v) for (p, i), v in lab.items()
             for it in [items[i]] if it["repeat_of"] is not None and (p, it["repeat_of"]) in lab]
    return {"n": len(pairs), "exact": (sum(x == y for x, y in pairs) / len(pairs)) if pairs else None}


def _check_resamples(n_resamples: Optional[int]) -> None:
    """``None`` (the study's setting) or a positive integer; 0 is not "the default"."""
    if n_resamples is not None and (isinstance(n_resamples, bool) or not isinstance(n_resamples, int)
                                    or n_resamples < 1):
        raise InputError(f"must be a positive integer, got {n_resamples!r}", field="n_resamples")


def agreement_summary(study: Study, n_resamples: Optional[int] = None, seed: Optional[int] = None
                      ) -> Dict[str, JudgeAgreement]:
    """Judge–human agreement per judge (overall and by surface group) as the summary schema."""
    r = study.config.readiness
    recs = judge_human_records(study)
    if not recs:
        raise InputError("no image-phase consensus yet: nothing to compare with the judges", path=study.path)
    _check_resamples(n_resamples)
    res = judge_human_agreement(recs, study.judges,
                                n_resamples=r.bootstrap_resamples if n_resamples is None else n_resamples,
                                seed=r.bootstrap_seed if seed is None else seed, labels=IMAGE_SUPPORT_LABELS)
    out: Dict[str, JudgeAgreement] = {}
    for j, block in res.items():
        ov = AgreementInterval(**block["overall"].as_dict())
        groups = [AgreementInterval(**cb.as_dict(), surface_group=g) for g, cb in block["by_surface"]]
        for k, g in enumerate(groups):
            g.validate(f"{j}.by_surface[{k}]")
        ov.validate(f"{j}.overall")
        out[j] = JudgeAgreement(overall=ov, by_surface=groups)
    return out


def confusion_counts(study: Study) -> Dict[str, Dict[str, Dict[str, int]]]:
    """judge → human consensus label → judge answer → count (unweighted, repeats excluded)."""
    out: Dict[str, Dict[str, Dict[str, int]]] = {}
    for r in judge_human_records(study):
        for j in study.judges:
            out.setdefault(j, {}).setdefault(r.human, {}).setdefault(r.judges[j], 0)
            out[j][r.human][r.judges[j]] += 1
    return out


def check_exportable(study: Study) -> None:
    """Refuse to export a rehearsal copy (its answers are discarded), and a real study that holds
    simulated judgments or adjudications."""
    if study.rehearsal_of is not None:
        raise InputError(f"refusing to export a rehearsal copy (participant test of study {study.rehearsal_of!r}): "
                         "rehearsal answers are discarded and never count", path=study.path)
    if study.mode != "real":
        return
    n = study.store.one("SELECT (SELECT COUNT(*) FROM annotations WHERE simulated = 1) + "
                        "(SELECT COUNT(*) FROM adjudications WHERE simulated = 1) AS n")["n"]
    if n:
        raise InputError(f"refusing to export real study {study.study_id!r}: it holds {n} simulated judgments "
                         "(simulated annotators are for tests and the demo report only)", path=study.path)


def public_rows(study: Study) -> List[Dict[str, Any]]:
    """Allow-listed per-judgment rows with salted hashed ids (no surface, judge answers, timestamps, notes)."""
    salt = study.store.meta("export_salt") or study.study_id
    items = {it["item_id"]: it for it in study.items()}
    rows = []
    for a in study.latest_annotations():
        it = items[a["item_id"]]
        row = {
            "item_hash": _hash(salt, "item", it["repeat_of"] or a["item_id"]),
            "rater_hash": _hash(salt, "rater", a["participant_id"]),
            "phase": a["phase"], "category": it["category"], "is_repeat": int(it["repeat_of"] is not None),
            "reason_tags": ";".join(json.loads(a["reason_tags"])),
        }
        for c in PUBLIC_COLUMNS:
            if c not in row:
                row[c] = a[c] if a[c] is not None else ""
        rows.append({c: row[c] for c in PUBLIC_COLUMNS})
    rows.sort(key=lambda r: (r["item_hash"], r["phase"], r["rater_hash"], r["is_repeat"]))
    return rows


def export_study(study: Study, out_dir: PathLike, include_public_rows: bool = False,
                 n_resamples: Optional[int] = None, judged_claims: Optional[Sequence[PathLike]] = None,
                 level: float = 0.95) -> Dict[str, Path]:
    """Write the aggregate export (and judge–human agreement, and public rows on request) to ``out_dir``.

    With image-phase consensus, also the human-corrected supported CBU per caption
    (:func:`capaudit.human.corrected.corrected_support`, ``CORRECTED_JSON``) from ``judged_claims``
    (default: the files the study recorded). Where the default files are gone or changed, the export
    says why in ``corrected_support_skipped`` instead; files given explicitly must match.
    """
    _check_resamples(n_resamples)
    check_exportable(study)
    out = check_output_dir(out_dir)
    paths: Dict[str, Path] = {}
    st = status_report(study)
    scales = {f: dict(sorted(Counter(a[f] for a in study.latest_annotations() if a["phase"] == "pair" and a[f] is not None)
                             .items())) for f in SCALE_FIELDS}
    cons = consensus_rows(study)
    dist: Dict[str, Dict[str, int]] = {}
    for (item_id, f), v in cons.items():
        dist.setdefault(f, {}).setdefault(str(v), 0)
        dist[f][str(v)] += 1
    payload: Dict[str, Any] = {
        "study_id": study.study_id, "protocol": study.config.protocol, "mode": study.mode,
        "simulated": study.mode == "simulated" or st["simulated_judgments"] > 0,
        "items": st["items"], "hidden_repeats": st["hidden_repeats"], "strata": study.sample_report().get("samples", {}),
        "population": study.sample_report().get("pools", {}), "judges": study.judges,
        "sampling_design": study.sample_report().get("design", {"sampling": "reference"}),
        "claims_shown_as_span": claims_shown_as_span(study),
        "participants": st["participants"], "progress": st["progress"]["by_phase"],
        "consensus": {f: dict(sorted(d.items())) for f, d in sorted(dist.items())},
        "scales": scales, "human_human": human_human(study), "repeat_consistency": repeat_consistency(study),
        "open_disagreements": st["open_disagreements"], "readiness": st["readiness"],
        "launch_seal": st["launch_seal"],  # ethics-determination id and digests; None for an unsealed study
    }
    recs = judge_human_records(study)
    if recs:
        agreement = agreement_summary(study, n_resamples=n_resamples)
        paths["agreement"] = write_text_atomic(out / AGREEMENT_JSON, format_agreement(agreement))
        payload["judge_human_agreement"] = AGREEMENT_JSON
        try:
            corrected = corrected_support(study, judged_claims, level=level,
                                          labels="simulated annotators" if payload["simulated"] else "human annotators")
        except InputError as exc:
            if judged_claims is not None:
                raise
            payload["corrected_support_skipped"] = str(exc)
        else:
            paths["corrected"] = write_json_atomic(out / CORRECTED_JSON,
                                                   corrected_payload(study, corrected, payload["simulated"]))
            payload["corrected_support"] = CORRECTED_JSON
    if include_public_rows:
        rows = public_rows(study)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(PUBLIC_COLUMNS), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        paths["public_rows"] = write_text_atomic(out / PUBLIC_CSV, buf.getvalue())
        payload["public_rows"] = PUBLIC_CSV
    paths["export"] = write_json_atomic(out / EXPORT_JSON, payload)
    return paths


__all__ = [
    "AGREEMENT_JSON", "CORRECTED_JSON", "Disagreement", "EXPORT_JSON", "PUBLIC_COLUMNS", "PUBLIC_CSV", "agreement_summary",
    "check_exportable", "claims_shown_as_span", "confusion_counts", "consensus_rows", "disagreements", "export_study", "field_agreement",
    "human_human", "judge_human_records", "public_rows", "ratings_by_field", "readiness", "repeat_consistency",
    "status_report",
]
