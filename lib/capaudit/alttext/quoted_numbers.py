"""The numbers the paper quotes from the alt-text stage (fragments ``alttext_filters`` and
``alttext_coverage``); missing values are left out."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Sequence

from capaudit.summaries.numbers_fragments import macro_word

from .coverage import CoverageCounter
from .funnel import Funnel

#: nocaps out-of-domain classes used by the CC12M study (Changpinyo et al. 2021, published)
STUDY_NOCAPS_OOD_CLASSES = 394
Numbers = Dict[str, Dict[str, Any]]


def funnel_numbers(funnels: Mapping[str, Mapping[str, Funnel]]) -> Numbers:
    """Rows kept by each pipeline on each corpus, as a count and as a percentage of the input."""
    numbers: Numbers = {}
    for corpus, fs in funnels.items():
        for pname, f in fs.items():
            key = "Alttext" + macro_word(corpus) + macro_word(pname)
            if f.input_rows:
                numbers[key + "KeptPct"] = {"value": 100 * f.kept / f.input_rows, "format": "num:1",
                                            "description": f"% of {corpus} rows kept by the {pname}-style pipeline"}
            numbers[key + "Kept"] = {"value": f.kept, "format": "int",
                                     "description": f"{corpus} rows kept by the {pname}-style pipeline"}
    return numbers


def check_numbers(notes: Mapping[str, str], funnels: Mapping[str, Mapping[str, Funnel]], dedup: Any = None) -> Numbers:
    """Per corpus, the sentence naming the rules that did not run (or checked only some rows), and the
    rows the URL de-duplication step dropped under each pipeline."""
    numbers: Numbers = {}
    for corpus, text in notes.items():
        if text:
            numbers["Alttext" + macro_word(corpus) + "NotRun"] = {
                "value": text[0].upper() + text[1:] + ".", "format": "text",
                "description": f"the rules of the {corpus} funnels that checked no row or only some"}
    if dedup is not None:
        for corpus, fs in funnels.items():
            for pname, f in fs.items():
                hit = next((r for r in f.rows if r.rule == dedup.name), None)
                if hit is not None and hit.rows_in > hit.unchecked:
                    numbers["Alttext" + macro_word(corpus) + macro_word(pname) + "DedupDropped"] = {
                        "value": hit.dropped, "format": "int",
                        "description": f"{corpus} rows whose URL is in the {dedup.list_label} URL list "
                                       f"({pname} funnel, step {dedup.name})"}
    return numbers


def person_numbers(rows: Iterable[Mapping[str, Any]]) -> Numbers:
    """Held-out span precision and recall of each pipeline's person substitution, per name filter."""
    numbers: Numbers = {}
    for r in rows:
        if r["split"] != "held_out":
            continue
        key = "Alttext" + macro_word(r["pipeline"]) + "Person" + macro_word(r["name_filter"])
        for m in [m for m in ("precision", "recall") if r[m] is not None]:
            numbers[key + m.capitalize()] = {
                "value": r[m], "format": "num:2",
                "description": f"held-out span {m} ({r['match_rule']} match, {r['labelled_rows']} labelled rows) "
                               f"of the {r['pipeline']} person substitution, name filter {r['name_filter']}"}
    return numbers


def concept_numbers(accounting: Mapping[str, int],
                            results: Mapping[str, Mapping[str, CoverageCounter]]) -> Numbers:
    """The nocaps out-of-domain class counts and each corpus's median mentions per 1M captions."""
    numbers: Numbers = {
        "AlttextNocapsOODClasses": {"value": accounting["nocaps_ood"], "format": "int",
                                    "description": "Open Images V7 boxable classes not mapped to COCO-80"},
        "AlttextNocapsOODStudyClasses": {"value": STUDY_NOCAPS_OOD_CLASSES, "format": "int",
                                         "description": "nocaps out-of-domain classes used by the CC12M study"},
        "AlttextNocapsOODNoSuperclasses": {"value": accounting["after_superclasses"], "format": "int",
                                           "description": "derived nocaps OOD classes after removing the readable "
                                                          "extra in-domain classes and OI superclasses"}}
    for n, cs in results.items():
        if "nocaps_ood" not in cs:
            continue
        s = cs["nocaps_ood"].summary()
        if s["per_million_median"] is None:
            continue
        numbers["Alttext" + macro_word(n.replace(":", "_")) + "NocapsMedianPerMillion"] = {
            "value": s["per_million_median"], "format": "num:1",
            "description": f"median nocaps-OOD mentions per 1M captions in {n}"}
    return numbers


def size_numbers(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int]) -> Numbers:
    """Each corpus's token/type ratio, raw (with its size) and size-matched."""
    numbers: Numbers = {}
    for r in rows:
        key = "Alttext" + macro_word(str(r["corpus"]).replace(":", "_"))
        if r["token_type_ratio"] is not None:
            numbers[key + "TokenTypeRatio"] = {
                "value": r["token_type_ratio"], "format": "num:1",
                "description": f"token/type ratio of {r['corpus']} ({r['captions']:,} captions, {r['words']:,} tokens; "
                               f"grows with corpus size)"}
        if r["matched_token_type_ratio_mean"] is not None:
            numbers[key + "TokenTypeRatioMatched"] = {
                "value": r["matched_token_type_ratio_mean"], "format": "num:2",
                "description": f"token/type ratio of {r['corpus']} on {r['matched_n']:,}-{r['matched_unit']} seeded "
                               f"subsamples, mean over seeds {list(seeds)}"}
    return numbers


__all__ = ["STUDY_NOCAPS_OOD_CLASSES", "check_numbers", "concept_numbers", "funnel_numbers", "person_numbers",
           "size_numbers"]
