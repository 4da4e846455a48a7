"""Table models of the paper elements that print their own LaTeX: the six VQA tables, the headline,
the lexical window and the policy CBU table.

Their ``.tex`` stays byte-identical (the reference run's tables are pinned); these models carry the
same rows (plain values, ``None`` where LaTeX prints ``--``) with columns, notes, caveats and
provenance, written as ``tables/<id>.csv`` and ``tables/<id>.table.json`` for the HTML report.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.io.atomic import write_json_atomic, write_text_atomic

from .render import to_csv
from .stage_tables import columns
from .table_model import Provenance, Table

Rows = List[Dict[str, Any]]


def dotted(fn: Callable[..., Any]) -> str:
    """``module.function`` of a function: the provenance's ``function``."""
    return f"{fn.__module__}.{fn.__qualname__}"


def shown_path(path: Path, run_dir: Optional[Path]) -> str:
    """``path`` relative to the run folder when it lies inside it, else as given."""
    if run_dir is not None:
        try:
            return str(Path(path).resolve().relative_to(Path(run_dir).resolve()))
        except ValueError:
            pass
    return str(path)


def input_files(cfg: Any, inp: Any, keys: Sequence[str]) -> Tuple[str, ...]:
    """The files of the ``paper.inputs`` keys this run has (``inp``: a
    :class:`~capaudit.paper.inputs.PaperInputs`), as a figure's provenance names them (relative to
    the run folder when inside it)."""
    files: List[str] = []
    for k in keys:
        v = inp.paths.get(k)
        if v:
            files += [shown_path(e["file"], cfg.out_dir) for e in v] if isinstance(v, list) else [shown_path(v, cfg.out_dir)]
    return tuple(files)


def element_provenance(element: str, files: Sequence[Path], function: Callable[..., Any],
                       inputs: Sequence[str] = (), run_dir: Optional[Path] = None) -> Provenance:
    """Paper element → its input files → notebook ``paper_<element>`` → function → ``paper.inputs`` keys."""
    return Provenance(element=element, files=tuple(shown_path(f, run_dir) for f in files),
                      notebook=f"paper_{element}", function=dotted(function),
                      inputs=tuple(f"paper.inputs.{k}" for k in inputs))


def write_model(table: Table, tables_dir: Path) -> Dict[str, Path]:
    """``<id>.csv`` and the model ``<id>.table.json`` (the element writes its own ``.tex``), atomically."""
    tables_dir = Path(tables_dir)
    return {"csv": write_text_atomic(tables_dir / f"{table.id}.csv", to_csv(table)),
            "model": write_json_atomic(tables_dir / f"{table.id}.table.json", table.to_json())}


def remove_model(table_id: str, tables_dir: Path) -> None:
    """Remove a table's CSV and model (the element wrote no table this run)."""
    for suffix in (".csv", ".table.json"):
        (Path(tables_dir) / f"{table_id}{suffix}").unlink(missing_ok=True)


# --- the six VQA tables ---------------------------------------------------------------------------

#: table id → title (the manuscript's caption, plain)
VQA_TITLES = {
    "cc12m_denominators": "Extraction and judge denominators",
    "excl_count_relation": "Supported CBU per caption with and without count and relation claims",
    "vqa_by_type": "Judge answer rates by claim type and exact judge agreement",
    "policy_control": "Policy control under both judges",
    "vqa_mean_std": "Every cell: mean ± caption-bootstrap std",
    "vqa_questions": "Judge denominators",
}


def _vqa_columns(table_id: str, a: str, b: str) -> Tuple[Any, ...]:
    if table_id == "cc12m_denominators":
        return columns(("surface", "Surface", "text", {"mark_key": "short_captions"}), ("requests", "Requests", "int"),
                       ("valid", "Valid", "int"), ("at_cap", "At cap", "int"), ("zero_claim", "Zero-claim", "int"),
                       ("judged", "Judged", "int"), ("questions", "Questions", "int"),
                       ("risk_a", f"{a} risk", "num", 3), ("risk_b", f"{b} risk", "num", 3))
    if table_id == "excl_count_relation":
        return columns(("comparison", "Comparison", "text", {"group": True}), ("judge", "Judge", "text"),
                       ("sup_ref", "Supp. CBU/cap, reference", "num", 2), ("sup_ours", "Supp. CBU/cap, audited", "num", 2),
                       ("excl_sup_ref", "excl. count/relation, reference", "num", 2),
                       ("excl_sup_ours", "excl. count/relation, audited", "num", 2),
                       ("excl_delta", "Δ excl. count/relation", "signed", 2),
                       ("excl_risk_ref", "Risk excl., reference", "num", 3), ("excl_risk_ours", "Risk excl., audited", "num", 3))
    if table_id == "vqa_by_type":
        pools = [(f"{m}_{k}_{p}", f"{a if k == 'a' else b} {'ours' if p == 'ours' else 'refs'} {m}", "num", 3)
                 for k, p in (("a", "ours"), ("a", "ref"), ("b", "ours"), ("b", "ref")) for m in ("yes", "no")]
        return columns(("type", "Type", "text"), *pools, ("agree", "Agree", "pct", 1))
    if table_id == "policy_control":
        return columns(("corpus", "Corpus", "text", {"group": True}), ("policy", "Policy", "text"),
                       ("responses", "Resp.", "int"), ("questions", "Questions", "int"),
                       ("sup_a", f"{a} sup/cap", "num", 2), ("risk_a", f"{a} risk", "num", 3),
                       ("sup_b", f"{b} sup/cap", "num", 2), ("risk_b", f"{b} risk", "num", 3))
    if table_id == "vqa_mean_std":
        return columns(("slice", "Slice", "text", {"group": True}), ("surface", "Surface", "text"),
                       ("sup_a", f"{a} sup/cap", "pm", 2, {"std_key": "sup_a_std"}),
                       ("risk_a", f"{a} risk", "pm", 3, {"std_key": "risk_a_std"}),
                       ("sup_b", f"{b} sup/cap", "pm", 2, {"std_key": "sup_b_std"}),
                       ("risk_b", f"{b} risk", "pm", 3, {"std_key": "risk_b_std"}))
    if table_id == "vqa_questions":
        return columns(("slice", "Dataset", "text"), ("surface", "Surface", "text"), ("eligibility", "Elig.@64", "num", 2),
                       ("responses", "Responses", "int"), ("questions", "Questions", "int"),
                       ("q_per_resp", "Q/resp.", "num", 2), ("risk", f"{a} risk", "num", 3))
    raise KeyError(table_id)


def vqa_models(rows: Mapping[str, Rows], judges: Tuple[str, str], provenance: Callable[[str], Provenance],
               notes: Sequence[str] = (), caveats: Sequence[str] = ()) -> List[Table]:
    """Models of the VQA tables in ``rows`` (table id → rows); ``judges`` name the A and B columns."""
    a, b = judges
    out = []
    for tid, rs in rows.items():
        foot = ("† captions shorter than B",) if any(r.get("short_captions") for r in rs) else ()
        out.append(Table(id=tid, title=VQA_TITLES[tid], axis="judges", columns=_vqa_columns(tid, a, b), rows=list(rs),
                         provenance=provenance(tid), notes=tuple(notes), footnotes=foot, caveats=tuple(caveats)))
    return out


# --- headline, lexical window, policy CBU ---------------------------------------------------------

def headline_model(rows: Rows, judges: Tuple[str, str], provenance: Provenance, notes: Sequence[str] = (),
                   caveats: Sequence[str] = ()) -> Table:
    """Comparisons ref → audited: claimed CBU/cap, and per judge supported CBU/cap and risk."""
    cols: List[Tuple[Any, ...]] = [("comparison", "Comparison", "text"), ("claimed_ref", "Claimed CBU/cap, reference", "num", 2),
                                   ("claimed_ours", "Claimed CBU/cap, audited", "num", 2)]
    for k, name in zip("ab", judges):
        cols += [(f"sup_{k}_ref", f"{name} supp. CBU/cap, reference", "num", 2),
                 (f"sup_{k}_ours", f"{name} supp. CBU/cap, audited", "num", 2),
                 (f"risk_{k}_ref", f"{name} risk, reference", "num", 3), (f"risk_{k}_ours", f"{name} risk, audited", "num", 3)]
    return Table(id="headline", title="Headline comparisons, reference → audited surface", axis="judges",
                 columns=columns(*cols), rows=list(rows), provenance=provenance, notes=tuple(notes), caveats=tuple(caveats))


def reference_headline_rows(rows: Sequence[Any]) -> Rows:
    """:class:`~capaudit.paper.tables.HeadlineRow` rows as the headline model's rows (A = Qwen, B = Gemma)."""
    return [{"comparison": r.label, "claimed_ref": r.claimed_ref, "claimed_ours": r.claimed_ours,
             "sup_a_ref": r.qwen_sup_ref, "sup_a_ours": r.qwen_sup_ours, "risk_a_ref": r.qwen_risk_ref,
             "risk_a_ours": r.qwen_risk_ours, "sup_b_ref": r.gemma_sup_ref, "sup_b_ours": r.gemma_sup_ours,
             "risk_b_ref": r.gemma_risk_ref, "risk_b_ours": r.gemma_risk_ours, "key": r.key} for r in rows]


def lexical_window_model(rows: Sequence[Any], provenance: Provenance, notes: Sequence[str] = (),
                         caveats: Sequence[str] = ()) -> Table:
    """:class:`~capaudit.paper.tables.LexicalWindowRow` rows: whitespace vs lexical claim window (B = 64)."""
    data = [{**asdict(r), "cbu_cap_change_pct": r.cbu_cap_change_pct, "cbu100_change": r.cbu100_change} for r in rows]
    return Table(id="lexical_window", title="Whitespace → lexical claim window (B = 64)", axis="claims",
                 columns=columns(("label", "Surface", "text"), ("cbu_cap_ws", "CBU/cap, whitespace window", "num", 2),
                                 ("cbu_cap_lex", "CBU/cap, lexical window", "num", 2),
                                 ("cbu_cap_change_pct", "Δ CBU/cap", "signed", 2, {"unit": "%"}),
                                 ("cbu100_ws", "CBU/100 lex, whitespace window", "num", 2),
                                 ("cbu100_lex", "CBU/100 lex, lexical window", "num", 2),
                                 ("captions_lex", "Captions", "int"), ("caption_tokens_median_lex", "Median lex", "num", 0)),
                 rows=data, provenance=provenance, notes=tuple(notes), caveats=tuple(caveats))


def policy_cbu_model(rows: Sequence[Any], provenance: Provenance, notes: Sequence[str] = (),
                     caveats: Sequence[str] = ()) -> Table:
    """:class:`~capaudit.paper.tables.PolicyCbuRow` rows: claimed density per captioning policy (B = 64)."""
    return Table(id="policy_cbu", title="Claimed density of captioning policies at B = 64", axis="claims",
                 columns=columns(("corpus", "Corpus", "text", {"group": True}), ("policy", "Policy", "text"),
                                 ("captions", "Captions", "int"), ("cbu_cap", "CBU/cap", "num", 2),
                                 ("cbu100", "CBU/100 lex", "num", 2)),
                 rows=[asdict(r) for r in rows], provenance=provenance, notes=tuple(notes), caveats=tuple(caveats))


__all__ = ["VQA_TITLES", "dotted", "element_provenance", "headline_model", "input_files", "lexical_window_model", "policy_cbu_model",
           "reference_headline_rows", "remove_model", "shown_path", "vqa_models", "write_model"]
