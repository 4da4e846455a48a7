"""Human-verification tables: judge–human agreement, and supported CBU per caption corrected by people."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from .shown_cells import interval_text, stage_keys
from .stage_tables import builder, columns
from .table_model import Table, caveats_in


@builder("human_judge_agreement", notebook="11_human_agreement")
def human_judge_agreement(data: Mapping[str, Any]) -> Table:
    """Per judge, overall then by surface group: weighted exact agreement, its 95% interval, claims,
    image clusters and who labelled."""
    rows = list(data["rows"])
    shown = [{**r, "interval": interval_text(r.get("lower"), r.get("upper"), 3)} for r in rows]
    return Table(
        id="human_judge_agreement", title="Judge-human agreement", axis="human",
        columns=columns(("judge", "Judge", "text"), ("surface_group", "Surface group", "text"),
                        ("estimate", "Agreement", "num", 3), ("interval", "95% interval", "text"),
                        ("n_records", "Claims", "int"), ("n_clusters", "Image clusters", "int"),
                        ("labels", "Labels", "text")),
        rows=shown, csv_columns=stage_keys(rows), provenance=data["provenance"],
        notes=("judge-human weighted exact agreement (image-cluster bootstrap, percentile 95% interval)",),
        caveats=_labels_caveats(data))


def _corrected_shown(r: Mapping[str, Any]) -> Dict[str, Any]:
    """A corrected-support row as shown: a surface group's row says so; a row without an estimate
    shows its status where the interval would be."""
    ok = r.get("status") == "ok"
    return {**r, "surface_label": r.get("surface") if r.get("scope") == "surface" else f"{r.get('surface_group')} (all)",
            "ppi_interval": interval_text(r.get("ppi_cap_lo"), r.get("ppi_cap_hi"), 2) if ok
            else str(r.get("status", "")).replace("_", " "),
            "human_interval": interval_text(r.get("human_cap_lo"), r.get("human_cap_hi"), 2) if ok else None}


@builder("human_corrected_support", notebook="11_human_agreement")
def human_corrected_support(data: Mapping[str, Any]) -> Table:
    """Per judge and surface: the judge's supported CBU/cap, the PPI++-corrected one and the
    labels-only one with their intervals, λ, labelled claims, claims left out, who labelled."""
    rows = list(data["rows"])
    level = next((r["level"] for r in rows if r.get("level") is not None), 0.95)
    return Table(
        id="human_corrected_support", title="Supported CBU per caption corrected by people", axis="human",
        columns=columns(("judge", "Judge", "text"), ("surface_label", "Surface", "text"),
                        ("judge_cap", "Judge CBU/cap", "num", 2), ("ppi_cap", "Corrected CBU/cap", "num", 2),
                        ("ppi_interval", "Interval", "text"), ("human_cap", "Human-only CBU/cap", "num", 2),
                        ("human_interval", "Interval", "text"),
                        ("ppi_lam", "lambda", "num", 2, {"tex_label": r"$\lambda$"}),
                        ("labelled", "Labelled", "int"), ("excluded_total", "Left out", "int"),
                        ("labels", "Labels", "text")),
        rows=[_corrected_shown(r) for r in rows], csv_columns=stage_keys(rows), provenance=data["provenance"],
        notes=(f"supported CBU per caption corrected by people: weighted PPI++ (tuned lambda) and human-only "
               f"weighted estimates, {100 * level:g}% t intervals; CBU/cap = share x claims / captions with a judged "
               f"claim",),
        caveats=_labels_caveats(data))


def _labels_caveats(data: Mapping[str, Any]) -> tuple:
    """``simulated annotators`` when the rows' labels (or the stage's meta) say so."""
    tags = caveats_in([str(r.get("labels", "")) for r in data["rows"]])
    if data["meta"].get("simulated") and "simulated annotators" not in tags:
        tags = ("simulated annotators", *tags)
    return tags


__all__ = ["human_corrected_support", "human_judge_agreement"]
