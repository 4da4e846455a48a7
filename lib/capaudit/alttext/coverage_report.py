"""Rows of the concept-coverage tables: coverage per corpus and vocabulary, LVIS frequency groups,
top tokens, image hosts and the nocaps out-of-domain class accounting."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

from .coverage import CONTRACT_KS, CoverageCounter

Results = Mapping[str, Mapping[str, CoverageCounter]]


def coverage_rows(results: Results) -> List[Dict[str, Any]]:
    """One row per corpus and vocabulary: mentions, medians, classes at ≥K per 1M captions, ..."""
    rows = []
    for name, cs in results.items():
        for vname, c in cs.items():
            s = c.summary(detail=True)
            rows.append({"corpus": name, "vocabulary": vname, "records": s["records"], "classes": s["classes"],
                         "instances_total": s["instances_total"], "median_per_class": s["median_per_class"],
                         "per_million_median": s["per_million_median"],
                         **{f"classes_ge_{k}_per_M": s["classes_at_least"][str(k)] for k in CONTRACT_KS},
                         "classes_mentioned": s["classes_mentioned"], "token_type_ratio": s["token_type_ratio"],
                         "avg_words": s["avg_words"]})
    return rows


def comparison_note(accounting: Mapping[str, int], results: Results) -> str:
    """How these coverage rows differ from the CC12M study's coverage table (its Table 9 in the seed):
    the vocabulary (the nocaps out-of-domain classes derived here vs the study's) and the corpora's
    splits and sizes; the published values are not shown beside ours (README non-goals)."""
    parts = [f"not the study's coverage table: nocaps_ood here = the {accounting['nocaps_ood']} Open Images V7 "
             f"boxable classes not mapped to COCO-80 (the CC12M study used {accounting['study']} nocaps "
             f"out-of-domain classes)"]
    for name, cs in results.items():
        records = next(iter(cs.values())).records if cs else 0
        if name == "cc3m_validation":
            parts.append(f"cc3m_validation = the CC3M validation split ({records:,} captions), not the full "
                         f"3.3M-caption training set")
        elif name == "alttext_raw":
            parts.append(f"alttext_raw = {records:,} raw web alt-texts (an img2dataset sample; alttext_raw:<pipeline> "
                         f"its rows our funnel kept), not CC12M")
    parts.append("published values not shown beside ours (none found in a citable source: README non-goals)")
    return "; ".join(parts)


def lvis_group_rows(results: Results) -> List[Dict[str, Any]]:
    """One row per corpus and LVIS frequency group (corpora without the LVIS vocabulary left out)."""
    rows = []
    for name, cs in results.items():
        c = cs.get("lvis")
        if c is None:
            continue
        s = c.summary(detail=True)
        pc = s["per_class"]
        for g, names in sorted(c.vocab.groups().items()):
            gs = s["groups"][g]
            rows.append({"corpus": name, "lvis_group": g, "classes": gs["classes"],
                         "mentioned": sum(1 for n in names if pc[n] > 0), "instances": gs["instances_total"],
                         "median_per_class": gs["median_per_class"], "per_million_median": gs["per_million_median"]})
    return rows


def top_token_rows(results: Results, vocabulary: str, top_k: int) -> List[Dict[str, Any]]:
    """The ``top_k`` most frequent tokens of each corpus (counted with ``vocabulary``'s counter)."""
    return [{"corpus": n, "rank": i + 1, "token": w, "count": c}
            for n, cs in results.items() for i, (w, c) in enumerate(cs[vocabulary].tokens.most_common(top_k))]


def domain_rows(results: Results, vocabulary: str, top_k: int) -> List[Dict[str, Any]]:
    """The ``top_k`` image hosts of each corpus: rows, share, and the corpus's URLs and distinct hosts."""
    rows = []
    for n, cs in results.items():
        d = cs[vocabulary].domains(top_k)
        for s, c, share in d["top_sites"]:
            rows.append({"corpus": n, "site": s, "count": c, "share": share, "urls": d["urls"],
                         "distinct_sites": d["distinct_sites"]})
    return rows


def nocaps_class_rows(accounting: Mapping[str, int]) -> List[Dict[str, Any]]:
    """The nocaps out-of-domain class accounting, one row per step."""
    return [{"step": k, "classes": v} for k, v in accounting.items()]


__all__ = ["comparison_note", "coverage_rows", "domain_rows", "lvis_group_rows", "nocaps_class_rows", "top_token_rows"]
