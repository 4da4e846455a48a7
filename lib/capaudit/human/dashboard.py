"""The study lead's dashboard (``notebooks/human_dashboard.py``, ``capaudit human serve --dashboard``).

Everything comes from the study database opened read-only (SQLite ``mode=ro``): nothing here can
change a study. Sections:

* **annotators**: per participant, judgments saved / assigned per phase, the median seconds per
  judgment and per item (an item's three phases summed, over items with every phase saved; the
  others are counted as in progress), and when they last saved;
* **agreement** by claim type and phase, per adjudicable field over items with ≥ 2 labels: exact
  agreement, κ (Cohen's when the same two people labelled every item, else Fleiss'; which one is
  named), Gwet's AC1, and for the yes/no questions positive and negative agreement with the
  abstentions dropped (:func:`capaudit.human.export.field_agreement`);
* **hidden repeats**: a participant's answer on an item vs on its hidden repeat, per field;
* **adjudication queue**: fields with the planned labels, no consensus and no adjudication.

An undefined statistic is shown as "n/a" with its n, never as 0; a simulated study says so.
"""

from __future__ import annotations

import html
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .claim_display import shown_claim
from .export import claims_shown_as_span, disagreements, field_agreement, ratings_by_field, repeat_consistency
from .protocol import ADJUDICABLE_FIELDS, CATEGORIES, LABELS, PHASES
from .study import Study

PathLike = Union[str, Path]


@dataclass(frozen=True)
class AnnotatorRow:
    pseudonym: str
    kind: str
    status: str
    by_phase: Dict[str, Tuple[int, int]]
    median_s_per_judgment: Optional[float]
    median_s_per_item: Optional[float]
    items_in_progress: int
    last_saved: Optional[str]


@dataclass(frozen=True)
class AgreementRow:
    phase: str
    field: str
    category: str
    n_items: int
    exact: Optional[float]
    kappa: Optional[float]
    kappa_kind: str
    ac1: Optional[float]
    positive: Optional[float]
    negative: Optional[float]


@dataclass(frozen=True)
class RepeatRow:
    field: str
    n: int
    exact: Optional[float]


@dataclass(frozen=True)
class QueueRow:
    item_id: str
    phase: str
    field: str
    category: str
    claim: str
    labels: Tuple[str, ...]


@dataclass(frozen=True)
class Dashboard:
    study_id: str
    mode: str
    status: str
    sampling: str
    n_items: int
    n_repeats: int
    n_shown_as_span: int
    annotators: List[AnnotatorRow]
    agreement: List[AgreementRow]
    repeats: List[RepeatRow]
    queue: List[QueueRow]
    rehearsal_of: Optional[str] = None


def _median(xs: Sequence[float]) -> Optional[float]:
    return statistics.median(xs) if xs else None


def annotator_rows(study: Study) -> List[AnnotatorRow]:
    """Progress and pace of every annotator (latest revision of each judgment)."""
    assigned: Dict[Tuple[str, str], int] = {}
    for r in study.store.read("SELECT participant_id, phase, COUNT(*) AS n FROM assignments GROUP BY participant_id, phase"):
        assigned[(r["participant_id"], r["phase"])] = r["n"]
    by_participant: Dict[str, List[Dict[str, Any]]] = {}
    for a in study.latest_annotations():
        by_participant.setdefault(a["participant_id"], []).append(a)
    out = []
    for p in study.participants():
        if p["role"] != "annotator":
            continue
        mine = by_participant.get(p["participant_id"], [])
        by_phase = {ph: (sum(a["phase"] == ph for a in mine), assigned.get((p["participant_id"], ph), 0)) for ph in PHASES}
        secs = [a["elapsed_ms"] / 1000 for a in mine if a["elapsed_ms"] is not None]
        phases_of: Dict[str, List[Optional[int]]] = {}
        for a in mine:
            phases_of.setdefault(a["item_id"], []).append(a["elapsed_ms"])
        # an item's time counts once every phase of it is saved (with its time); partial items wait
        whole = [sum(v) / 1000 for v in phases_of.values() if len(v) == len(PHASES) and None not in v]
        out.append(AnnotatorRow(p["pseudonym"], p["kind"], p["status"], by_phase, _median(secs), _median(whole),
                                len(phases_of) - len(whole), max((a["created_at"] for a in mine), default=None)))
    return out


def agreement_rows(study: Study) -> List[AgreementRow]:
    """Agreement per (phase, field) for every claim type with ≥ 1 item labelled twice, and over all types."""
    category = {it["item_id"]: it["category"] for it in study.items()}
    ratings = ratings_by_field(study)
    out = []
    for f, ph in ADJUDICABLE_FIELDS.items():
        for cat in ("all",) + CATEGORIES:
            sub = {i: r for i, r in ratings[f].items() if cat == "all" or category.get(i) == cat}
            block = field_agreement(sub, f)
            if not block["n_items"]:
                continue
            nom = block.get("nominal") or {}
            binary = block.get("binary") or {}
            kappa, kind = (nom.get("cohen_kappa"), "Cohen") if nom.get("cohen_kappa") is not None else \
                (nom.get("fleiss_kappa"), "Fleiss")
            out.append(AgreementRow(ph, f, cat, block["n_items"], nom.get("exact"), kappa, kind, nom.get("gwet_ac1"),
                                    binary.get("positive_agreement"), binary.get("negative_agreement")))
    return out


def repeat_rows(study: Study) -> List[RepeatRow]:
    """Test–retest per adjudicable field (:func:`capaudit.human.export.repeat_consistency`)."""
    out = []
    for f in ADJUDICABLE_FIELDS:
        r = repeat_consistency(study, f)
        out.append(RepeatRow(f, r["n"], r["exact"]))
    return out


def queue_rows(study: Study) -> List[QueueRow]:
    """The items to adjudicate, with the claim as annotators read it."""
    out = []
    for d in disagreements(study):
        it = study.item(d.item_id)
        out.append(QueueRow(d.item_id, d.phase, d.field, it["category"],
                            shown_claim(it["unit"], it["span"] or "", it["target"] or "", it["category"]), d.labels))
    return out


def study_dashboard(study: Study) -> Dashboard:
    """Every section of the dashboard for ``study`` (module docstring)."""
    items = study.items()
    n_base = sum(it["repeat_of"] is None for it in items)
    return Dashboard(study.study_id, study.mode, study.status, study.config.sampling, n_base,
                     len(items) - n_base, claims_shown_as_span(study), annotator_rows(study), agreement_rows(study),
                     repeat_rows(study), queue_rows(study), study.rehearsal_of)


# -- rendering ------------------------------------------------------------------------------------------
def _num(x: Optional[float], digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _table(caption: str, header: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows) or \
        f'<tr><td colspan="{len(header)}">none yet</td></tr>'
    return (f'<table class="capaudit-dash {cls}"><caption>{e(caption)}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


_CSS = """<style>
.capaudit-dashboard { font-size: 13px; max-width: 1260px; }
.capaudit-dashboard h2 { font-size: 18px; margin: 4px 0; }
.capaudit-dashboard .capaudit-dash-grid { display: grid; grid-template-columns: 1fr 1fr; gap: 10px 18px; }
table.capaudit-dash { border-collapse: collapse; width: 100%; }
table.capaudit-dash caption { text-align: left; font-weight: bold; font-size: 14px; padding: 4px 0; }
table.capaudit-dash th, table.capaudit-dash td { border-bottom: 1px solid #ddd; padding: 2px 6px; text-align: left;
  line-height: 1.3; vertical-align: top; }
table.capaudit-dash th { background: #f3f3f3; }
.capaudit-simulated { color: #b71c1c; font-weight: bold; }
</style>"""


def render_dashboard(d: Dashboard) -> str:
    """The dashboard as one HTML fragment (tables; "n/a" for undefined statistics)."""
    sim = (' <span class="capaudit-simulated">SIMULATED study: judgments come from simulated annotators</span>'
           if d.mode == "simulated" else "")
    if d.rehearsal_of:
        sim += (f' <span class="capaudit-simulated">REHEARSAL copy of study {html.escape(d.rehearsal_of)}: answers are '
                "discarded and never count</span>")
    head = (f"<h2>Study {html.escape(d.study_id)} · {html.escape(d.status)}{sim}</h2>"
            f"<p>{d.n_items} items and {d.n_repeats} hidden repeats; {d.n_shown_as_span} items show annotators "
            "their caption span because the extractor's unit does not render it faithfully (their human labels "
            "judge the span, the judges the unit). Read-only view of the study database; reload the page for "
            "fresh numbers.</p>")
    ann = _table("Annotators: judgments saved / assigned, pace", [
        "annotator", "kind", "status", "caption", "image", "pair", "median s / judgment", "median s / item",
        "items in progress", "last saved"], [
        [a.pseudonym, a.kind, a.status] + [f"{a.by_phase[ph][0]} / {a.by_phase[ph][1]}" for ph in PHASES]
        + [_num(a.median_s_per_judgment, 1), _num(a.median_s_per_item, 1), str(a.items_in_progress),
           (a.last_saved or "never")[:19]]
        for a in d.annotators], "capaudit-dash-annotators")
    design = ("" if d.sampling == "reference" else
              f"; unweighted over this sample, which the {d.sampling.replace('_', '-')} design enriches in "
              "claims the judges disagree on")
    agr = _table(f"Agreement by claim type and phase (items labelled twice or more{design})", [
        "phase", "question", "claim type", "n items", "exact", "κ", "AC1", "pos. agr.", "neg. agr."], [
        [r.phase, r.field.replace("_", " "), r.category.replace("_", " "), str(r.n_items), _num(r.exact),
         f"{_num(r.kappa)} ({r.kappa_kind})" if r.kappa is not None else "n/a", _num(r.ac1), _num(r.positive),
         _num(r.negative)] for r in d.agreement], "capaudit-dash-agreement")
    rep = _table("Hidden repeats: same annotator, same claim", ["question", "n pairs", "same answer"], [
        [r.field.replace("_", " "), str(r.n), _num(r.exact)] for r in d.repeats], "capaudit-dash-repeats")
    que = _table(f"Adjudication queue ({len(d.queue)})", ["item", "phase", "question", "claim type", "claim", "labels"], [
        [q.item_id[:10], q.phase, LABELS.get(q.field, q.field), q.category.replace("_", " "), q.claim,
         ", ".join(q.labels)] for q in d.queue], "capaudit-dash-queue")
    return (f'{_CSS}<div class="capaudit-dashboard">{head}{ann}<div class="capaudit-dash-grid"><div>{rep}{que}</div>'
            f"<div>{agr}</div></div></div>")


def dashboard_app(params_path: Optional[PathLike] = None, study: Optional[PathLike] = None) -> Any:
    """The dashboard widget for ``study`` / ``$CAPAUDIT_STUDY`` / the params file's study (never raises)."""
    import ipywidgets as W

    from .widgets import resolve_study_path

    try:
        st = Study.load(resolve_study_path(params_path, study), read_only=True)
    except Exception as exc:
        return W.HTML(f'<p class="capaudit-error">The study cannot be opened: {html.escape(str(exc))}</p>')
    try:
        return W.HTML(render_dashboard(study_dashboard(st)))
    finally:
        st.close()


__all__ = ["AgreementRow", "AnnotatorRow", "Dashboard", "QueueRow", "RepeatRow", "agreement_rows", "annotator_rows",
           "dashboard_app", "queue_rows", "render_dashboard", "repeat_rows", "study_dashboard"]
