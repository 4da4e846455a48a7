"""Paper elements of the reference run that our own runs get from their stages.

Each function reads the reference study's published summaries named in ``paper.inputs`` (through the
adapters ``reference_inputs_<axis>.py``), builds the SAME table and figure models our stages produce for
the manuscript element (the builders of ``tables_<axis>.py``, the figure functions of ``*_figures.py``)
and writes them into ``outputs/<run>/tables`` and ``figures``. Every model's provenance names the
published file(s) it was read from; a table whose inputs this run does not name is not written (and a
stale copy is removed). ``paper.reference_meta`` describes the published runs where a file does not
(bootstrap replicates, the retrieval model, who labelled).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

from ..summaries.prompt_support import direction_summary, format_direction_summary_csv, seven_pool_means
from ..prompts.tables import pool_wins_rows
from . import reference_inputs_embed as E
from . import reference_inputs_judges as J
from . import reference_inputs_text as T
from .element_models import dotted, input_files
from .figure_files import FigureInfo
from .inputs import PaperInputs, paper_inputs
from .render import write_table
from .reference_inputs import read_text
from .stage_tables import build_table
from .table_model import Provenance, Table

Files = Tuple[str, ...]


class ElementFiles:
    """What one reference element wrote: table ids, figure stems and the rows it shows."""

    def __init__(self) -> None:
        self.paths: Dict[str, Path] = {}
        self.frames: List[pd.DataFrame] = []

    def frame(self) -> pd.DataFrame:
        return pd.concat(self.frames, ignore_index=True) if self.frames else pd.DataFrame()


def _meta(cfg: Any, key: str) -> Mapping[str, Any]:
    return dict((cfg.section("paper").get("reference_meta") or {}).get(key) or {})


def _prov(cfg: Any, inp: PaperInputs, table: str, notebook: str, fn: Callable[..., Any], keys: Sequence[str]) -> Provenance:
    present = [k for k in keys if inp.paths.get(k)]
    return Provenance(element=table, files=input_files(cfg, inp, present), notebook=notebook, function=dotted(fn),
                      inputs=tuple(f"paper.inputs.{k}" for k in present))


def _table(table_id: str, rows: List[Dict[str, Any]], meta: Mapping[str, Any], prov: Provenance,
           notes: Sequence[str]) -> Table:
    """The model our stage's builder makes of ``rows``, with notes that describe the published file."""
    t = build_table({"table": table_id, "rows": rows, "meta": dict(meta), "function": prov.function,
                     "inputs": list(prov.files)})
    return replace(t, provenance=prov, notes=tuple(notes))


def _write(out: ElementFiles, t: Table, tables_dir: Path) -> None:
    write_table(t, tables_dir)
    out.paths[t.id] = tables_dir / f"{t.id}.tex"
    out.frames.append(pd.DataFrame([{"table": t.id, "rows": len(t.rows), "files": "; ".join(t.provenance.files)}]))


def _drop(table_id: str, tables_dir: Path) -> None:
    for suffix in (".csv", ".tex", ".table.json"):
        (tables_dir / f"{table_id}{suffix}").unlink(missing_ok=True)


def _drop_figure(stem: str, figures_dir: Path) -> None:
    for suffix in (".pdf", ".png", ".csv", ".table.json"):
        (figures_dir / f"{stem}{suffix}").unlink(missing_ok=True)


def _published(files: Files) -> str:
    """The published files as the reference names them (``results/...``)."""
    shown = [f"results/{f.replace(chr(92), '/').split('/results/', 1)[1]}" if "/results/" in f.replace(chr(92), "/")
             else Path(f).name for f in files]
    return "published file(s): " + ", ".join(shown)


# --- text budget ----------------------------------------------------------------------------------

def run_reference_text(cfg: Any) -> ElementFiles:
    """``text_stats`` (fair-slice TSVs + opener rates of the violation breakdown), ``text_paired_deltas``
    (``paired_delta_ci.tsv``) and ``budget_curves`` (B-eligibility at the published budgets)."""
    from .text_figures import plot_budget_curves

    inp = paper_inputs(cfg)
    dirs = cfg.dirs()
    out = ElementFiles()
    nb = "paper_reference_text"
    meta = _meta(cfg, "text")
    slices: List[Tuple[Optional[str], Any]] = []
    if inp.has("text_stats"):
        slices.append((None, inp.path("text_stats")))
    slices += [(e.get("label"), e["file"]) for e in inp.paths.get("text_stats_slices") or []]
    keys = ("text_stats", "text_stats_slices", "text_violations")
    # every published input parsed (a bad one refused) before any file is written
    delta_rows = T.paired_delta_rows(inp.path("text_paired_deltas")) if inp.has("text_paired_deltas") else None
    if slices:
        rows = T.text_stats_rows(slices, inp.path("text_violations", required=False))
        curves = T.eligibility_curves(slices)
        prov = _prov(cfg, inp, "text_stats", nb, T.text_stats_rows, keys)
        _write(out, _table("text_stats", rows, {"budget": T.BUDGET, "window_definition": T.window_definition(meta)}, prov, (
            f"Reference study, {_published(prov.files)}; B={T.BUDGET}: {T.window_definition(meta)}.",
            "Avg lex = avg_tokens, elig@64 = cov64, prefix content = prefix_top100_64 (content top-100 prefix mass), "
            "D-3 = d3_64, rep-4 = rep4_64, opener = J_meta_statement rate of violation_code_breakdown.tsv for the same "
            "comparison and pair count; -- = not published.")), dirs["tables"])
        stem = dirs["figures"] / "budget_curves"
        files = input_files(cfg, inp, ("text_stats", "text_stats_slices"))
        plot_budget_curves(curves, stem, FigureInfo(
            "B-eligibility vs budget B (reference study: cov64, cov128, cov256 of the fair-slice TSVs)", "text", nb,
            dotted(T.eligibility_curves), notes=("only B-eligibility is published at more than one budget",),
            inputs=files))
        out.paths["budget_curves"] = Path(f"{stem}.pdf")
    else:
        _drop("text_stats", dirs["tables"])
        _drop_figure("budget_curves", dirs["figures"])
    if delta_rows is not None:
        prov = _prov(cfg, inp, "text_paired_deltas", nb, T.paired_delta_rows, ("text_paired_deltas",))
        _write(out, _table("text_paired_deltas", delta_rows, {}, prov, (
            f"Reference study, {_published(prov.files)}: per pair local - reference, mean and normal 95% interval "
            "(mean +- 1.96 sd/sqrt(n)), as published (reference-spec 2.7).",)), dirs["tables"])
    else:
        _drop("text_paired_deltas", dirs["tables"])
    return out


# --- prompt-pool support ----------------------------------------------------------------------------

def run_reference_prompts(cfg: Any) -> ElementFiles:
    """``prompt_pool_wins`` (:func:`capaudit.prompts.tables.pool_wins_rows`, the prompt stage's function, on
    the published bootstrap TSV; the published direction summary is checked equal to the one recomputed from
    it), ``prompt_support_pool_means`` and ``prompt_support_pool_heatmap`` (the prompt stage's figures)."""
    from .prompt_figures import plot_pool_delta_heatmap, plot_pool_means

    inp = paper_inputs(cfg)
    dirs = cfg.dirs()
    out = ElementFiles()
    nb = "paper_reference_prompts"
    if not inp.has("prompt_support"):
        _drop("prompt_pool_wins", dirs["tables"])
        for stem in ("prompt_support_pool_means", "prompt_support_pool_heatmap"):
            _drop_figure(stem, dirs["figures"])
        return out
    rows = inp.prompt_support()
    pools = inp.pools(rows)
    direction = inp.path("prompt_direction_summary", required=False)
    if direction is not None:
        from capaudit.errors import InputError

        if format_direction_summary_csv(direction_summary(rows)) != read_text(direction):
            raise InputError("differs from the direction summary recomputed from paper.inputs.prompt_support",
                             path=direction)
    meta = dict(_meta(cfg, "prompt_support"))
    meta.setdefault("pools", len(pools) if pools else len({r.prompt_pool for r in rows}))
    meta["block_sizes"] = {r.comparison: r.block_size for r in rows}
    prov = _prov(cfg, inp, "prompt_pool_wins", nb, pool_wins_rows, ("prompt_support", "prompt_direction_summary"))
    t = build_table({"table": "prompt_pool_wins", "rows": pool_wins_rows(rows, pools), "meta": meta,
                     "function": prov.function, "inputs": list(prov.files)})
    notes = (*t.notes, f"Reference study, {_published(prov.files)}"
             + ("; the direction summary recomputed from the TSV equals the published one" if direction else ""))
    _write(out, replace(t, provenance=prov, notes=notes), dirs["tables"])
    files = input_files(cfg, inp, ("prompt_support",))
    plot_pool_means(seven_pool_means(rows, pools), dirs["figures"], FigureInfo(
        "Prompt-pool support: mean over pools, local vs reference", "prompts", nb, dotted(seven_pool_means),
        inputs=files))
    plot_pool_delta_heatmap(rows, dirs["figures"], FigureInfo(
        "Per-pool block-delta mean (local - reference)", "prompts", nb, "capaudit.paper.prompt_figures.plot_pool_delta_heatmap",
        inputs=files))
    out.paths.update({"prompt_support_pool_means": dirs["figures"] / "prompt_support_pool_means.pdf",
                      "prompt_support_pool_heatmap": dirs["figures"] / "prompt_support_pool_heatmap.pdf"})
    return out


# --- encoder probes -----------------------------------------------------------------------------------

def run_reference_embed(cfg: Any) -> ElementFiles:
    """``encoder_truncation`` (tokenizer-truncation TSV), ``encoder_truncation_windows`` (naive-control
    encoder truncation JSON), ``embedding_probes`` (caption-embedding profile TSV) and
    ``retrieval_margins`` (the LongCLIP retrieval files)."""
    inp = paper_inputs(cfg)
    tables = cfg.dirs()["tables"]
    out = ElementFiles()
    nb = "paper_reference_embed"

    def element(table_id: str, keys: Tuple[str, ...], fn: Callable[..., List[Dict[str, Any]]],
                rows: Callable[[], List[Dict[str, Any]]], meta: Mapping[str, Any], note: str) -> None:
        if not inp.has(keys[0]):
            _drop(table_id, tables)
            return
        prov = _prov(cfg, inp, table_id, nb, fn, keys)
        _write(out, _table(table_id, rows(), meta, prov, (f"Reference study, {_published(prov.files)}: {note}",)), tables)

    element("encoder_truncation", ("encoder_truncation",), E.encoder_truncation_rows,
            lambda: E.encoder_truncation_rows(inp.path("encoder_truncation")), {},
            "untruncated token counts with special tokens (Hugging Face tokenizers, reference-spec 8.3); truncated = "
            "count > max length; percentiles nearest-rank; 100k captions per surface.")
    element("encoder_truncation_windows", ("naive_encoder_truncation",), E.naive_window_rows,
            lambda: E.naive_window_rows(inp.path("naive_encoder_truncation")), {},
            "naive-prompt control captions, whole (window full); mean lex over the captions; the file publishes no p95.")
    element("embedding_probes", ("embedding_profile",), E.embedding_profile_rows,
            lambda: E.embedding_profile_rows(inp.path("embedding_profile")), {},
            "Vendi over blocks with its normal 95% interval, eRank and participation ratio of the embedding "
            "covariance, top-1 eigenvalue mass, per encoder (reference-spec 8.1); top-10 mass and centroid cosine are "
            "not published.")
    retrieval = _meta(cfg, "retrieval")
    extra = [(str(e.get("mode", "")), e["file"]) for e in inp.paths.get("retrieval_naive") or []]
    element("retrieval_margins", ("retrieval_plot", "retrieval_summary", "retrieval_naive"), E.retrieval_rows,
            lambda: E.retrieval_rows(inp.path("retrieval_plot"), inp.path("retrieval_summary", required=False), extra),
            E.retrieval_meta(retrieval),
            f"image-text retrieval margins and recall on the CC12M judged slice, model {retrieval.get('model', 'not named')}, "
            f"max length {retrieval.get('max_length', 'not named')} (reference-spec 8.2); mode full = whole captions, "
            "input64 = captions cut at 64 lex units; the input64 rows of longclip_retrieval_summary.tsv equal the plot CSV's.")
    return out


# --- judges and human agreement -------------------------------------------------------------------------

def run_reference_judges(cfg: Any) -> ElementFiles:
    """``judges_summary`` (the published VQA rollup, per-judge summaries, supported-risk Pareto export and
    the superseded bootstrap export) and ``human_judge_agreement`` (the published agreement bootstrap)."""
    inp = paper_inputs(cfg)
    tables = cfg.dirs()["tables"]
    out = ElementFiles()
    nb = "paper_reference_judges"
    keys = ("vqa_rollup", "judge_summaries", "vqa_pareto", "vqa_bootstrap_ci")
    rows: List[Dict[str, Any]] = []
    if inp.has("vqa_rollup"):
        rows += J.rollup_rows(inp.path("vqa_rollup"))
    if inp.paths.get("judge_summaries"):
        rows += J.judge_summary_rows([entry for entry, _ in inp.judge_summaries()])
    if inp.has("vqa_pareto"):
        rows += J.pareto_rows(inp.path("vqa_pareto"))
    if inp.has("vqa_bootstrap_ci"):
        rows += J.bootstrap_ci_rows(inp.path("vqa_bootstrap_ci"))
    if rows:
        prov = _prov(cfg, inp, "judges_summary", nb, J.rollup_rows, keys)
        _write(out, _table("judges_summary", rows, {}, prov, (
            f"Reference study, {_published(prov.files)}: each group names the file its rows come from; values as "
            "published (vqa_summary rows: supported CBU/cap = yes / responses, the cell definition of reference-spec "
            "5.4); no bootstrap std is published with these rows; -- = not published.",)), tables)
    else:
        _drop("judges_summary", tables)
    if inp.has("human_agreement"):
        human = _meta(cfg, "human")
        prov = _prov(cfg, inp, "human_judge_agreement", nb, J.agreement_rows, ("human_agreement",))
        rows = J.agreement_rows(inp.human_agreement(), dict(human.get("judges") or {}), str(human.get("labels", "people")))
        _write(out, _table("human_judge_agreement", rows, {}, prov, (
            f"Reference study, {_published(prov.files)}: judge-human weighted exact agreement with image-cluster "
            "bootstrap percentile 95% intervals, as published (the annotation export is not released).",)), tables)
    else:
        _drop("human_judge_agreement", tables)
    return out


__all__ = ["ElementFiles", "run_reference_embed", "run_reference_judges", "run_reference_prompts", "run_reference_text"]
