"""Alt-text stage: filter funnels (:func:`run_filters`) and long-tail concept coverage (:func:`run_coverage`).

Params section ``alttext`` (see the README snippet)::

    alttext:
      batch_size: 256
      engine: local                          # or ray (issue 15); also workers, address, shards,
      workers: 1                             #   overridable per part under filters: / coverage:
      filters:
        pipelines: [cc3m, cc12m]            # shipped names, YAML files, or {name, blocks}
        overrides: {}                        # {pipeline: {block name: {param: value}}}
        person_labels: shipped               # score <PERSON> substitution on gold spans (or a labels YAML)
        dedup: {label: cc3m_validation, dataset: cc3m_validation, path: ..., format: tsv, header: false,
                columns: [caption, url], url_field: url}   # optional first step url_dedup_<label>
        person_match: overlap                # span match rule: overlap | exact
        corpora:                             # row sources (alttext.rows) + text_field (+ url_field)
          - {name: alttext_raw, dataset: img2dataset_alttext_sample, path: test_10000.parquet,
             text_field: TEXT, url_field: URL}
      coverage:
        vocabularies: [nocaps_ood, lvis, objects365]
        corpora:                             # row sources, or {surface: <name in surfaces:>}
          - {name: cc3m_validation, dataset: cc3m_validation, path: ..., format: tsv, header: false,
             columns: [caption, url], text_field: caption, url_field: url}
          - {surface: coco_karpathy_test}
        filtered: [alttext_raw]              # also the kept rows of each pipeline for these corpora
        extra_surfaces: []                   # e.g. recaptioned surfaces; missing files are skipped
        hypernym_check: [cc3m_validation, alttext_raw, "alttext_raw:cc3m"]
        size_matched: {n: 5000, unit: tokens, seeds: [0, 1, 2]}   # n null = the smallest corpus

Outputs (``outputs/<run>/``): ``artifacts/alttext/filters/<corpus>/<pipeline>/{kept,dropped}.jsonl``,
``funnel.csv``, ``manifest.json``; ``artifacts/alttext/coverage/<corpus>__<vocabulary>.json``; table
rows ``artifacts/tables/<table>.json`` (the paper renders them: ``capaudit.paper.tables_alttext``) of
``alttext_funnel``, ``alttext_funnel_<corpus>``, ``alttext_transform_examples``,
``alttext_person_substitution`` (when ``person_labels`` is set), ``alttext_coverage``,
``alttext_size_stats`` (size-dependent statistics, raw and size-matched), ``alttext_lvis_groups``,
``alttext_top_tokens``, ``alttext_domains``, ``alttext_hypernym_check``, ``alttext_nocaps_classes``;
quoted numbers in the fragments ``alttext_filters`` and ``alttext_coverage``. Figures are drawn by the
notebooks with :mod:`capaudit.paper.alttext_figures` from the returned data (stages never import
``paper/``). Row building lives in :mod:`.funnel_report`, :mod:`.person_report`,
:mod:`.coverage_report`, :mod:`.size_report` and :mod:`.quoted_numbers`; corpora in :mod:`.corpora`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.results import StageResult
from capaudit.summaries.numbers_fragments import write_numbers_fragment
from capaudit.summaries.table_rows import write_table_rows
from capaudit.text.lexical import lex_units

from .corpora import corpus_source, corpus_texts, coverage_corpora, filter_outputs, input_name, safe_name
from .counting import count_corpus, engine_for
from .coverage import CONTRACT_KS, at_least_curve
from .coverage_report import comparison_note, coverage_rows, domain_rows, lvis_group_rows, nocaps_class_rows, top_token_rows
from .file_runs import filter_file
from .funnel import Funnel, build_pipeline, dedup_block, with_dedup
from .funnel_report import (BACKEND_NOTE, NOT_RUN_NOTE, check_note, funnel_rows, side_by_side, side_by_side_rows,
                            transform_examples)
from .params import DEFAULT_PIPELINES, DEFAULT_VOCABULARIES, SECTION, AlttextParams, CoverageParams
from .person_report import PERSON_NOTE, person_substitution_rows
from .quoted_numbers import check_numbers, concept_numbers, funnel_numbers, person_numbers, size_numbers
from .resources import data_file
from .size_report import size_definition, size_stat_rows
from .sizematch import SIZE_NOTE
from .vocab import load_vocabulary, nocaps_ood_accounting

FILTERS_STAGE, COVERAGE_STAGE = "alttext_filters", "alttext_coverage"


def _tables(cfg: RunConfig, stage: str, tables: Sequence[Tuple[str, List[Dict[str, Any]], str, Sequence[str],
                                                                 Mapping[str, Any]]]) -> None:
    """Write each ``(table, rows, function, inputs, meta)``'s rows (inputs in the run folder named
    relative to it, the same for any run name)."""
    run_dir = cfg.out_dir.resolve()

    def name(p: Any) -> str:
        path = Path(p).resolve()
        return path.relative_to(run_dir).as_posix() if path.is_relative_to(run_dir) else str(p)

    for table, rows, function, inputs, meta in tables:
        write_table_rows(cfg.dirs()["artifacts"], table, stage, rows, function=function, meta=meta,
                         inputs=[name(p) for p in inputs])


# --- filters -----------------------------------------------------------------------------------------

def override_note(overrides: Mapping[str, Any]) -> str:
    """In words, the published rule parameters a run changed (``alttext.filters.overrides``), e.g.
    ``rule parameters changed from the published: cc12m rare_words.min_count=1``; empty when none."""
    said = [f"{pipe} {block}.{param}={value}" for pipe, blocks in sorted((overrides or {}).items())
            for block, params in sorted((blocks or {}).items()) for param, value in sorted((params or {}).items())]
    return "rule parameters changed from the published: " + ", ".join(said) if said else ""


@dataclass(frozen=True, eq=False)
class FiltersResult(StageResult):
    """What :func:`run_filters` wrote: funnels by corpus and pipeline, the long table, side-by-side
    funnels, transform examples and the person-substitution scores (``None`` when not asked)."""

    funnels: Dict[str, Dict[str, Funnel]]
    table: pd.DataFrame
    side_by_side: Dict[str, pd.DataFrame]
    examples: pd.DataFrame
    person_substitution: Optional[pd.DataFrame]


@dataclass(frozen=True, eq=False)
class CoverageResult(StageResult):
    """What :func:`run_coverage` wrote (tables as frames, ≥K curves, counters by corpus)."""

    results: Dict[str, Dict[str, Any]]
    table: pd.DataFrame
    lvis_groups: pd.DataFrame
    top_tokens: pd.DataFrame
    domains: pd.DataFrame
    hypernym_check: pd.DataFrame
    nocaps_accounting: pd.DataFrame
    notes: Dict[str, str]
    curves: Dict[str, Dict[str, Any]]
    size_stats: pd.DataFrame


def stage_params(cfg: RunConfig) -> AlttextParams:
    """The run's ``alttext:`` section as :class:`AlttextParams`."""
    return AlttextParams.from_section(cfg.section(SECTION), cfg.path)


def run_filters(cfg: RunConfig) -> FiltersResult:
    """Run every configured pipeline over every filter corpus; funnel tables side by side, examples of
    transformed captions, the funnel figure and quoted numbers."""
    params = stage_params(cfg)
    fp = params.filters
    batch = params.batch_size
    pipes_spec = list(fp.pipelines)
    overrides = fp.overrides
    corpora = list(fp.corpora)
    eng = fp.engine.kwargs()
    if not corpora:
        raise InputError(f"{cfg.path}: alttext.filters.corpora is empty", field="alttext.filters.corpora")
    funnels: Dict[str, Dict[str, Funnel]] = {}
    pipes: Dict[str, Any] = {}
    long_rows: List[Dict[str, Any]] = []
    examples: List[Dict[str, Any]] = []
    funnel_files: List[Path] = []
    dedup = dedup_block(fp.dedup)
    check_notes: Dict[str, str] = {}
    for spec in corpora:
        name = safe_name(str(spec.get("name") or "corpus"))
        src, text_field, _ = corpus_source(spec)
        funnels[name] = {}
        for ps in spec.get("pipelines", pipes_spec):
            pname = ps if isinstance(ps, str) and "/" not in ps and not ps.endswith((".yaml", ".yml")) else None
            pipe = with_dedup(build_pipeline(ps, overrides=(overrides.get(pname or "") or None)), dedup)
            outs = filter_outputs(cfg, name, pipe.name)
            f = filter_file(src, text_field, pipe, outs["kept"], outs["funnel"], outs["dropped"], batch_size=batch,
                            manifest_path=outs["manifest"], **engine_for(src, eng))
            funnels[name][pipe.name] = f
            pipes.setdefault(pipe.name, pipe)
            long_rows += funnel_rows(name, f)
            funnel_files.append(outs["funnel"])
            examples += transform_examples(outs["kept"], text_field, name, pipe.name, fp.examples)
        check_notes[name] = check_note(name, funnels[name], next((r for r, _ in src), None))
    here = "capaudit.alttext.funnel_report"
    changed = override_note(overrides)
    note = BACKEND_NOTE + (f"; {changed}" if changed else "")
    tables = [("alttext_funnel", long_rows, f"{here}.funnel_rows", funnel_files, {"note": note})]
    for spec in corpora:
        name = safe_name(str(spec.get("name") or "corpus"))
        said = check_notes.get(name)
        tables.append((f"alttext_funnel_{name}", side_by_side_rows(funnels[name]), f"{here}.side_by_side_rows",
                       [p for p in funnel_files if p.parent.parent.name == name],
                       {"note": note + (f"; {said}" if said else ""), "corpus": name, "pipelines": list(funnels[name]),
                        "not_run_note": NOT_RUN_NOTE}))
    tables.append(("alttext_transform_examples", examples, f"{here}.transform_examples",
                   [filter_outputs(cfg, c, p)["kept"] for c, fs in funnels.items() for p in fs],
                   {"note": BACKEND_NOTE}))
    numbers = funnel_numbers(funnels)
    numbers.update(check_numbers(check_notes, funnels, dedup))
    if changed:
        numbers["AlttextOverrideNote"] = {"value": changed[0].upper() + changed[1:] + ".", "format": "text",
                                          "description": "the rule parameters this run changed from the published"}
    person = None
    if fp.person_labels:
        labels, match = fp.person_labels, fp.person_match
        rows = person_substitution_rows(pipes, labels, match)
        person = pd.DataFrame(rows)
        if rows:
            note = PERSON_NOTE.format(match=match)
            write_json_atomic(cfg.dirs()["artifacts"] / "alttext" / "person_substitution.json",
                              {"person_substitution": rows, "definition": note})
            tables.append(("alttext_person_substitution", rows,
                           "capaudit.alttext.person_report.person_substitution_rows",
                           ["alttext/data/person_labels.yaml" if labels == "shipped" else labels],
                           {"note": note, "match_rule": match}))
            numbers.update(person_numbers(rows))
    _tables(cfg, FILTERS_STAGE, tables)
    write_numbers_fragment(cfg.dirs()["artifacts"], FILTERS_STAGE, numbers, backend=BACKEND_NOTE)
    return FiltersResult(funnels, pd.DataFrame(long_rows), {corpus: side_by_side(fs) for corpus, fs in funnels.items()},
                         pd.DataFrame(examples, columns=["corpus", "pipeline", "original", "transformed"]), person)


# --- coverage ------------------------------------------------------------------------------------------

def run_coverage(cfg: RunConfig) -> CoverageResult:
    """Coverage of every configured corpus (and of each pipeline's kept rows) for each vocabulary; the
    coverage table, LVIS frequency groups, ≥K curves, top tokens, web domains, the CC3M hypernym
    check and the nocaps out-of-domain class accounting."""
    params = stage_params(cfg)
    cp = params.coverage
    dirs = cfg.dirs()
    lemmatiser, top_k = cp.lemmatiser, cp.top_k
    vocabs = [load_vocabulary(v) for v in cp.vocabularies]
    corpora, specs = coverage_corpora(cfg, params)
    results: Dict[str, Dict[str, Any]] = {}
    notes: Dict[str, str] = {}
    hyp_tokens = data_file("hypernyms.yaml").get("check_tokens", [])
    hyp_check = set(cp.hypernym_check)
    hyp_rows = []
    cov_dir = dirs["artifacts"] / "alttext" / "coverage"
    cov_files: List[Path] = []
    eng = cp.engine.kwargs()
    for name, texts, note in corpora:
        notes[name] = note
        if texts is None:
            continue
        counters, hyp_row = count_corpus(texts, vocabs, lemmatiser, eng, hyp_tokens if name in hyp_check else None)
        if hyp_row is not None:
            hyp_rows.append({"corpus": name, **hyp_row})
        results[name] = counters
        for vname, c in counters.items():
            path = cov_dir / f"{safe_name(name.replace(':', '__'))}__{vname}.json"
            write_json_atomic(path, c.summary(detail=True, top_k=top_k))
            cov_files.append(path)
    first_vocab = vocabs[0].name
    acct = nocaps_ood_accounting()
    sizes, size_meta = size_stats_rows(cfg, cp, results, specs)
    here = "capaudit.alttext.coverage_report"
    rows = {"coverage": coverage_rows(results), "lvis": lvis_group_rows(results),
            "tokens": top_token_rows(results, first_vocab, top_k), "domains": domain_rows(results, first_vocab, top_k)}
    tables: List[Tuple[str, List[Dict[str, Any]], str, Sequence[str], Mapping[str, Any]]] = [
        ("alttext_coverage", rows["coverage"], f"{here}.coverage_rows", cov_files,
         {"note": f"{BACKEND_NOTE}; {SIZE_NOTE} (alttext_size_stats); {comparison_note(acct, results)}",
          "ks": list(CONTRACT_KS)}),
        ("alttext_size_stats", sizes, "capaudit.alttext.size_report.size_stat_rows",
         [input_name(specs[n]) for n in results], size_meta),
        ("alttext_top_tokens", rows["tokens"], f"{here}.top_token_rows", cov_files, {"note": BACKEND_NOTE}),
        ("alttext_domains", rows["domains"], f"{here}.domain_rows", cov_files, {"note": BACKEND_NOTE}),
        ("alttext_nocaps_classes", nocaps_class_rows(acct), f"{here}.nocaps_class_rows",
         ["class_lists", "alttext/data/oi_coco_mapping.yaml"], {"note": "derived from class_lists + oi_coco_mapping.yaml"})]
    if rows["lvis"]:
        tables.append(("alttext_lvis_groups", rows["lvis"], f"{here}.lvis_group_rows", cov_files, {"note": BACKEND_NOTE}))
    if hyp_rows:
        tables.append(("alttext_hypernym_check", hyp_rows, "capaudit.alttext.coverage.HypernymCounts.row",
                       [input_name(specs[r["corpus"]]) for r in hyp_rows], {"note": BACKEND_NOTE}))
    _tables(cfg, COVERAGE_STAGE, tables)
    numbers = concept_numbers(acct, results)
    numbers.update(size_numbers(sizes, size_meta["seeds"]))
    write_numbers_fragment(dirs["artifacts"], COVERAGE_STAGE, numbers, backend="lexical matcher + " + lemmatiser)
    curves = {v.name: {n: at_least_curve(cs[v.name].per_class(), cs[v.name].records) for n, cs in results.items()}
              for v in vocabs}
    return CoverageResult(
        results, pd.DataFrame(rows["coverage"]), pd.DataFrame(rows["lvis"]), pd.DataFrame(rows["tokens"]),
        pd.DataFrame(rows["domains"], columns=["corpus", "site", "count", "share", "urls", "distinct_sites"]),
        pd.DataFrame(hyp_rows), pd.DataFrame(nocaps_class_rows(acct)), notes, curves, pd.DataFrame(sizes))


def size_stats_rows(cfg: RunConfig, cp: CoverageParams, results: Mapping[str, Any],
                    specs: Mapping[str, Mapping[str, Any]]) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """``alttext_size_stats`` rows (each corpus re-read as lexical units) and their definition; also
    ``artifacts/alttext/size_stats.json``."""
    unit, seeds, n = cp.size_unit, list(cp.size_seeds), cp.size_n
    lists = {name: [lex_units(t) for t, _ in corpus_texts(cfg, specs[name])[1]] for name in results}
    rows, n_used = size_stat_rows(lists, unit, seeds, n)
    note = size_definition(n_used, unit, seeds)
    write_json_atomic(cfg.dirs()["artifacts"] / "alttext" / "size_stats.json",
                      {"definition": note, "n": n_used, "unit": unit, "seeds": seeds, "rows": rows})
    return rows, {"note": note, "n": n_used, "unit": unit, "seeds": seeds}


__all__ = ["CoverageResult", "DEFAULT_PIPELINES", "DEFAULT_VOCABULARIES", "FiltersResult", "filter_outputs",
           "run_coverage", "run_filters", "size_stats_rows", "stage_params"]
