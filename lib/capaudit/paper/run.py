"""One entry point per paper element (each ``notebooks/paper_<element>.py`` calls one of these).

Every function takes a :class:`capaudit.config.RunConfig`, reads only the summaries named in
``paper.inputs`` and writes into ``outputs/<run>/tables/`` or ``figures/`` (``numbers.json`` at the
run root). It returns an :class:`ElementResult` whose ``frame`` is what the notebook displays.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from ..io.atomic import write_text_atomic as write_text
from ..summaries.numbers_fragments import read_numbers_fragments
from . import checks as G
from .element_models import (
    element_provenance,
    headline_model,
    input_files,
    lexical_window_model,
    policy_cbu_model,
    reference_headline_rows,
    remove_model,
    vqa_models,
    write_model,
)
from .figures import (
    budget_sweep_points,
    plot_budget_sweep,
    plot_prompt_support,
    plot_prompt_support_heatmap,
    plot_yield_risk,
    prompt_support_bars,
    prompt_support_heat,
    yield_risk_points,
)
from .inputs import PaperInputs, paper_inputs
from .numbers import build_numbers, write_numbers
from .table_model import Provenance, caveats_in, stand_in_caveats
from .tables_claims import NO_PER_CAPTION_DATA
from .tables import (
    PolicyCbuRow,
    headline_rows,
    headline_tex,
    lexical_window_rows,
    lexical_window_tex,
    policy_cbu_rows,
    policy_cbu_tex,
)
from .vqa_generic import (
    GENERIC_ROWS,
    all_generic_rows,
    all_generic_tables,
    comparison_rows,
    headline_table_rows,
    judge_pair,
    policy_rows,
    provenance_comment,
)
from .vqa_generic import headline_tex as generic_headline_tex
from .vqa_tables import JUDGE_SHORT, VQA_ROWS, all_vqa_rows, all_vqa_tables

#: the A and B judges of the reference run's columns
REFERENCE_JUDGES = (JUDGE_SHORT[0][1], JUDGE_SHORT[1][1])


@dataclass
class ElementResult:
    """Files written by one paper element and the values it shows."""

    element: str
    paths: Dict[str, Path]
    frame: pd.DataFrame = field(repr=False)

    def _repr_html_(self) -> str:  # notebook display
        files = "".join(f"<li><code>{k}</code>: {v}</li>" for k, v in self.paths.items())
        return f"<h4>{self.element}</h4><ul>{files}</ul>" + self.frame.to_html(index=False)

    def show(self, width: int = 480) -> None:
        """Display every PNG the element wrote (in a notebook); elements a run skipped show nothing."""
        from IPython.display import Image, display

        for name, path in self.paths.items():
            if str(path).endswith(".png"):
                display(Image(filename=str(path), width=width))


def _frame(rows: Sequence[Any]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) if is_dataclass(r) else dict(r) for r in rows])


def _inputs(cfg: Any) -> PaperInputs:
    return paper_inputs(cfg)


def _provenance(cfg: Any, inp: PaperInputs, element: str, function: Callable[..., Any], keys: Sequence[str]) -> Provenance:
    """Provenance of an element's table: the files of the ``paper.inputs`` keys this run has."""
    present = [k for k in keys if inp.paths.get(k)]
    files: List[Path] = []
    for k in present:
        v = inp.paths[k]
        files += [e["file"] for e in v] if isinstance(v, list) else [v]
    return element_provenance(element, files, function, present, cfg.out_dir)


def _layout_judges(layout: Any) -> Tuple[str, str]:
    a, b = judge_pair(layout)
    return a.short, (b.short if b is not None else "B")


def _layout_notes(layout: Any) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """Notes (the judges line every table file opens with) and caveats of a layout's tables."""
    return (provenance_comment(layout)[2:].strip(),), stand_in_caveats("judges", layout.judge_kinds, layout.any_offline)


def captioner_note(cfg: Any) -> Tuple[str, Tuple[str, ...]]:
    """Who captioned this run's policy surfaces, as its recap stage recorded it
    (``artifacts/tables/recap_summary.json``: the captioners and whether one is capaudit's offline
    heuristic captioner): ``(note, caveats)``; empty when the run recaptioned nothing."""
    import json

    path = cfg.out_dir / "artifacts" / "tables" / "recap_summary.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8")).get("meta") or {} if path.is_file() else {}
    except (OSError, ValueError, AttributeError):
        meta = {}
    captioners = [str(c) for c in meta.get("captioners") or []]
    if not captioners:
        return "", ()
    return (f"policy surfaces captioned by {'; '.join(captioners)}",
            stand_in_caveats("captioner", meta.get("captioner_kinds") or (), bool(meta.get("offline_captioner"))))


def run_vqa_tables(cfg: Any) -> ElementResult:
    """The six VQA table bodies of §5.5 → ``tables/*.tex`` (our own runs: laid out by
    ``paper.inputs.vqa_layout``, :mod:`.vqa_generic`; ``policy_control.tex`` only when a surface has a policy),
    and their models (``tables/<id>.csv``, ``<id>.table.json``)."""
    inp = _inputs(cfg)
    dirs = cfg.dirs()
    cells = inp.cells()
    layout = inp.vqa_layout()
    if layout is not None:  # our own run: every table names its judges
        tables = {k: provenance_comment(layout) + v for k, v in all_generic_tables(cells, layout).items()}
        rows, judges, fns = all_generic_rows(cells, layout), _layout_judges(layout), {**GENERIC_ROWS, "policy_control": policy_rows}
        notes, caveats = _layout_notes(layout)
        keys: Tuple[str, ...] = ("cells", "vqa_layout")
    else:  # the reference layout, byte-identical to the published tables
        tables = all_vqa_tables(cells, inp.eligibility())
        rows, judges, fns = all_vqa_rows(cells, inp.eligibility()), REFERENCE_JUDGES, VQA_ROWS
        notes, caveats, keys = (), (), ("cells", "text_stats")
    cap_note, cap_caveats = captioner_note(cfg) if layout is not None else ("", ())
    if cap_note and "policy_control.tex" in tables:
        head, _, body = tables["policy_control.tex"].partition("\n")  # after the judges line
        tables["policy_control.tex"] = f"{head}\n% {cap_note}\n{body}"
    paths = {name: write_text(dirs["tables"] / name, text) for name, text in tables.items()}
    for t in vqa_models(rows, judges, lambda tid: _provenance(cfg, inp, "vqa_tables", fns[tid], keys), notes, caveats):
        if t.id == "policy_control" and cap_note:
            t = replace(t, notes=(*t.notes, cap_note), caveats=(*t.caveats, *cap_caveats))
        write_model(t, dirs["tables"])
    if layout is not None and "policy_control.tex" not in tables:
        (dirs["tables"] / "policy_control.tex").unlink(missing_ok=True)  # no policy surface in this run
        remove_model("policy_control", dirs["tables"])
    frame = pd.DataFrame(
        [
            {"slice": c.slice, "judge": c.judge, "surface": c.surface, **{k: v for k, v in asdict(c.all_types).items()}}
            for c in cells.cells
        ]
    )
    return ElementResult("vqa_tables", paths, frame)


def run_headline(cfg: Any) -> ElementResult:
    """Headline table → ``tables/headline.tex`` (and its model): the reference's cross-corpus comparisons,
    or the comparisons of ``vqa_layout`` (claimed CBU/cap from the judged slices' claimed summaries)."""
    inp = _inputs(cfg)
    tables = cfg.dirs()["tables"]
    layout = inp.vqa_layout()
    if layout is not None:
        cells = inp.cells()
        path = write_text(tables / "headline.tex", provenance_comment(layout) + generic_headline_tex(cells, layout))
        notes, caveats = _layout_notes(layout)
        keys: Tuple[str, ...] = ("cells", "vqa_layout")
        write_model(headline_model(headline_table_rows(cells, layout), _layout_judges(layout),
                                   _provenance(cfg, inp, "headline", headline_table_rows, keys), notes, caveats), tables)
        return ElementResult("headline", {"headline.tex": path}, _frame(comparison_rows(cells, layout)))
    rows = headline_rows(inp.cells(), inp.claimed_rollup(), inp.frontier())
    path = write_text(tables / "headline.tex", headline_tex(rows))
    keys = ("cells", "claimed_rollup", "frontier")
    write_model(headline_model(reference_headline_rows(rows), REFERENCE_JUDGES,
                               _provenance(cfg, inp, "headline", headline_rows, keys)),
                tables)
    return ElementResult("headline", {"headline.tex": path}, _frame(rows))


def run_lexical_window(cfg: Any) -> ElementResult:
    """Lexical-window sensitivity (G7) → ``tables/lexical_window.tex`` (and its model)."""
    inp = _inputs(cfg)
    tables = cfg.dirs()["tables"]
    rows = lexical_window_rows(inp.frontier(), inp.lexical_window())
    backend = inp.claims_backend()  # recorded by our claims stage; the reference run stays byte-identical
    note = f"% claims extracted by {backend}\n" if backend else ""
    path = write_text(tables / "lexical_window.tex", note + lexical_window_tex(rows))
    keys = ("frontier", "lexical_window")
    write_model(lexical_window_model(rows, _provenance(cfg, inp, "lexical_window", lexical_window_rows, keys),
                                     notes=(note[2:].strip(),) if note else (),
                                     caveats=caveats_in([backend or ""])), tables)
    frame = _frame(rows).assign(cbu_cap_change_pct=[r.cbu_cap_change_pct for r in rows], cbu100_change=[r.cbu100_change for r in rows])
    return ElementResult("lexical_window", {"lexical_window.tex": path}, frame)


def run_policy_cbu(cfg: Any) -> ElementResult:
    """Policy-control claimed density (G3) → ``tables/policy_cbu.tex`` (and its model): the claimed
    summaries of ``paper.inputs.policy_control_claimed`` and, in our own runs, every judged surface with a
    ``policy`` (claimed CBU/cap from its slice's claimed summary). No rows → no file."""
    inp = _inputs(cfg)
    rows = policy_cbu_rows(inp.policy_claimed(), inp.frontier() if inp.has("frontier") else None)
    layout = inp.vqa_layout()
    if layout is not None:
        rows += [PolicyCbuRow(s.corpus or sl.name, s.policy, int(s.claimed["captions"]), s.claimed["cbu_per_cap"],
                              s.claimed["cbu_per_100_lex"], f"{sl.name}/{s.name}")
                 for sl in layout.slices for s in sl.surfaces if s.policy is not None and s.claimed]
    tables = cfg.dirs()["tables"]
    target = tables / "policy_cbu.tex"
    if not rows:
        target.unlink(missing_ok=True)
        remove_model("policy_cbu", tables)
        return ElementResult("policy_cbu", {}, _frame(rows))
    note = ("% claimed CBU of the judged slices' policy surfaces (their extractor is named in claims_summary.tex)\n"
            if layout is not None else "")  # the reference run stays byte-identical
    cap_note, cap_caveats = captioner_note(cfg) if layout is not None else ("", ())
    if cap_note:
        note += f"% {cap_note}\n"
    path = write_text(target, note + policy_cbu_tex(rows))
    keys = ("policy_control_claimed", "frontier", "vqa_layout")
    notes = tuple(line[2:].strip() for line in note.splitlines()) + \
        ((f"published claimed summaries: {NO_PER_CAPTION_DATA}",) if inp.has("policy_control_claimed") else ())
    write_model(policy_cbu_model(rows, _provenance(cfg, inp, "policy_cbu", policy_cbu_rows, keys), notes=notes,
                                 caveats=cap_caveats), tables)
    return ElementResult("policy_cbu", {"policy_cbu.tex": path}, _frame(rows))


def run_fig2(cfg: Any) -> ElementResult:
    """Figure 2: left (yield vs risk per cell) and right (budget sweep with Pareto flags)."""
    inp = _inputs(cfg)
    figs = cfg.dirs()["figures"]
    layout = inp.vqa_layout()
    pts = yield_risk_points(inp.cells(), layout=layout)
    paths = {f"left_{k}": v for k, v in plot_yield_risk(pts, figs, layout=layout,
                                                         inputs=input_files(cfg, inp, ("cells", "vqa_layout"))).items()}
    sweep = budget_sweep_points(inp.frontier()) if inp.has("frontier") else []
    if sweep:
        paths.update({f"right_{k}": v for k, v in plot_budget_sweep(sweep, figs, inputs=input_files(cfg, inp, ("frontier",)),
                                                                   backend=inp.claims_backend()).items()})
    return ElementResult("fig2", paths, _frame(sweep or pts))


def run_fig1_prompt_support(cfg: Any) -> ElementResult:
    """Figure 1 right (seven-pool means) and the per-pool heatmap."""
    inp = _inputs(cfg)
    figs = cfg.dirs()["figures"]
    rows = inp.prompt_support()
    pools = inp.pools(rows)
    bars = prompt_support_bars(rows, pools)
    files = input_files(cfg, inp, ("prompt_support",))
    paths = {f"bars_{k}": v for k, v in plot_prompt_support(bars, figs, inputs=files).items()}
    heat = prompt_support_heat(rows, pools=pools)
    paths.update({f"heatmap_{k}": v for k, v in plot_prompt_support_heatmap(heat, figs, inputs=files).items()})
    return ElementResult("fig1_prompt_support", paths, _frame(bars))


def run_numbers(cfg: Any) -> ElementResult:
    """Numbers map → ``numbers.json`` and ``tables/numbers.tex`` (sections whose inputs exist), with
    every stage's numbers fragment of this run (``artifacts/numbers/*.json``) merged in."""
    inp = _inputs(cfg)
    dirs = cfg.dirs()
    ps = inp.prompt_support() if inp.has("prompt_support") else None
    m = build_numbers(
        cells=inp.cells() if inp.has("cells") else None,
        rollup=inp.claimed_rollup() if inp.has("claimed_rollup") else None,
        frontier=inp.frontier() if inp.has("frontier") else None,
        lexical=inp.lexical_window() if inp.has("lexical_window") else None,
        claims_backend=inp.claims_backend(),
        policies=inp.policy_claimed(),
        prompt_support=ps,
        human=inp.human_agreement() if inp.has("human_agreement") else None,
        layout=inp.vqa_layout(),
        fragments=read_numbers_fragments(dirs["artifacts"]),
        pools=inp.pools(ps),
    )
    jp, tp = write_numbers(m, cfg.out_dir / "numbers.json", dirs["tables"] / "numbers.tex")
    frame = pd.DataFrame([{"macro": "\\" + n.name, "text": n.text, "description": n.description, "source": n.source} for n in m])
    return ElementResult("numbers", {"numbers.json": jp, "numbers.tex": tp}, frame)


def run_stage_tables(cfg: Any) -> ElementResult:
    """Every stage table of this run (the rows under ``artifacts/tables/``) as CSV, LaTeX and the
    table model the HTML report reads (``paper.stage_tables``)."""
    from .stage_tables import render_stage_tables

    dirs = cfg.dirs()
    tables = render_stage_tables(dirs["artifacts"], dirs["tables"], run_dir=cfg.out_dir)
    frame = pd.DataFrame([{"table": t.id, "axis": t.axis, "rows": len(t.rows), "caveats": ", ".join(t.caveats),
                           "source": t.provenance.function} for t in tables])
    return ElementResult("stage_tables", {t.id: dirs["tables"] / f"{t.id}.tex" for t in tables}, frame)


def _reference(name: str, fn_name: str) -> Callable[[Any], ElementResult]:
    """An element of :mod:`capaudit.paper.run_reference` as an :class:`ElementResult`."""
    def run(cfg: Any) -> ElementResult:
        from . import run_reference

        out = getattr(run_reference, fn_name)(cfg)
        return ElementResult(name, out.paths, out.frame())
    run.__name__ = run.__qualname__ = f"run_{name}"
    run.__doc__ = f"The reference run's ``{name}`` element: :func:`capaudit.paper.run_reference.{fn_name}`."
    return run


run_reference_text = _reference("reference_text", "run_reference_text")
run_reference_prompts = _reference("reference_prompts", "run_reference_prompts")
run_reference_embed = _reference("reference_embed", "run_reference_embed")
run_reference_judges = _reference("reference_judges", "run_reference_judges")


#: Element name (notebook ``paper_<name>``) → function.
ELEMENTS: Dict[str, Callable[[Any], ElementResult]] = {
    "vqa_tables": run_vqa_tables,
    "headline": run_headline,
    "lexical_window": run_lexical_window,
    "policy_cbu": run_policy_cbu,
    "fig2": run_fig2,
    "fig1_prompt_support": run_fig1_prompt_support,
    "stage_tables": run_stage_tables,
    "reference_text": run_reference_text,
    "reference_prompts": run_reference_prompts,
    "reference_embed": run_reference_embed,
    "reference_judges": run_reference_judges,
    "numbers": run_numbers,
}


def run_all(cfg: Any, elements: Optional[Sequence[str]] = None) -> List[ElementResult]:
    """Run the named elements (default: all) in order."""
    names = list(elements) if elements else list(ELEMENTS)
    unknown = [n for n in names if n not in ELEMENTS]
    if unknown:
        raise ValueError(f"unknown paper element(s) {unknown}; known: {list(ELEMENTS)}")
    return [ELEMENTS[n](cfg) for n in names]


def check_reference(cfg: Any) -> List[G.CheckResult]:
    """Golden checks G1–G8 and G12 over ``paper.inputs`` (+ ``paper.reference_tables`` for G1)."""
    inp = _inputs(cfg)
    cells = inp.cells()
    frontier = inp.frontier()
    out: List[G.CheckResult] = []
    tables_dir = inp.path("reference_tables", required=False)
    if tables_dir is not None:
        out.append(G.check_g1_tables(cells, tables_dir, inp.eligibility()))
    else:
        out.append(G.CheckResult("G1 VQA tables byte-identical", skipped="no paper.inputs.reference_tables"))
    out.append(G.check_g2_cells(cells))
    out.append(G.check_g3_claimed(inp.policy_claimed(), frontier))
    out.append(G.check_g4_rollup(inp.claimed_rollup()))
    out.append(G.check_g5_judges(cells, inp.judge_summaries()))
    out.append(G.check_g6_frontier(frontier, cells))
    out.append(G.check_g7_lexical(frontier, inp.lexical_window()))
    out.append(G.check_g8_prompt_support(inp.prompt_support(), inp.path("prompt_direction_summary", required=False)))
    out.append(G.check_g12_agreement(inp.human_agreement()))
    return out
