"""Alt-text-stage tables (issue 14): filter funnels, rewritten captions, person substitution, concept
coverage, size-matched statistics, LVIS groups, top tokens, image hosts, hypernyms, nocaps classes.

Each is a whole booktabs tabular (the manuscript sets them with ``\\tabfileinput`` /
``\\tabfilelong`` and its own column spec); the header row is the row keys, as the stage's CSV names
them; the note (``meta["note"]``) names the backends or the definition of the quantities. One
number format per quantity: counts ``int``, shares ``pct`` (2 decimals), ratios and medians ``num``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Tuple

from capaudit.errors import InputError

from .stage_tables import builder, columns
from .table_model import Column, Table

FILTERS, COVERAGE = "10_alttext_filters", "10b_concept_coverage"
SHARE = ("pct", 2)


def _meta(data: Mapping[str, Any], key: str) -> Any:
    """``meta[key]`` of the rows file (a missing one names the file and field)."""
    if key not in data["meta"]:
        raise InputError(f"table rows of {data['table']!r} have no meta {key!r}", path=data.get("path"),
                         field=f"meta.{key}")
    return data["meta"][key]


def _tabular(data: Mapping[str, Any], title: str, cols: Tuple[Column, ...], *notes: str) -> Table:
    return Table(id=str(data["table"]), title=title, axis="alttext", columns=cols, rows=list(data["rows"]),
                 provenance=data["provenance"], notes=(str(_meta(data, "note")), *notes), latex="tabular")


def _named(*specs: Tuple[Any, ...]) -> Tuple[Column, ...]:
    """Columns labelled by their key: ``_named(("rows_in", "int"), ("share", "pct", 2))``."""
    return columns(*[(key, key, *rest) for key, *rest in specs])


@builder("alttext_funnel", notebook=FILTERS)
def alttext_funnel(data: Mapping[str, Any]) -> Table:
    """Every step of every pipeline on every corpus: rows in, dropped, kept, unchecked, rewritten."""
    status = any("status" in r for r in data["rows"])
    cols = _named(("corpus", "text"), ("pipeline", "text"), ("order", "int"), ("rule", "text"), ("block", "text"),
                  ("kind", "text"), ("rows_in", "int"), ("dropped", "int"), ("kept", "int"), ("unchecked", "int"),
                  ("changed", "int"), *([("status", "text")] if status else []), ("backend", "text"),
                  ("kept_share_of_input", *SHARE))
    notes = (("status: all / partly / not run = the rule checked every, some or none of the rows that reached it "
              "(unchecked: rows it had nothing to read on, e.g. no image metadata)",) if status else ())
    return _tabular(data, "Every rule of the alt-text cascades", cols, *notes)


@builder("alttext_funnel_*", notebook=FILTERS)
def alttext_funnel_side_by_side(data: Mapping[str, Any]) -> Table:
    """One corpus's pipelines side by side: per rule, rows each pipeline drops and keeps (``--`` where
    the rule is not part of the pipeline or checked no row) and, when the rows carry it, ``checked``
    (``all``, ``not run``, ``<n> of <rows in>``)."""
    pipes: Sequence[str] = _meta(data, "pipelines")
    checked = any(f"{p} checked" in r for r in data["rows"] for p in pipes)
    whats = (("dropped", "int"), ("kept", "int")) + ((("checked", "text"),) if checked else ())
    cols = _named(("rule", "text"), *[(f"{p} {what}", kind) for p in pipes for what, kind in whats])
    if not checked:
        return _tabular(data, f"Filter funnel on {_meta(data, 'corpus')}", cols, "--: the rule is not part of that cascade")
    return _tabular(data, f"Filter funnel on {_meta(data, 'corpus')}", cols,
                    "--: the rule is not part of that cascade, or it checked no row (checked: not run)",
                    "checked: all, not run, or the rows the rule could check of the rows that reached it")



@builder("alttext_transform_examples", notebook=FILTERS)
def alttext_transform_examples(data: Mapping[str, Any]) -> Table:
    """Captions a transformation rewrote: original and transformed text."""
    return _tabular(data, "Alt-text rewrites",
                    _named(("corpus", "text"), ("pipeline", "text"), ("original", "text"), ("transformed", "text")))


@builder("alttext_person_substitution", notebook=FILTERS)
def alttext_person_substitution(data: Mapping[str, Any]) -> Table:
    """Span-level precision and recall of the person substitution per pipeline, name filter and split
    (the CSV adds the block, the chosen filter, the match rule and the labels file)."""
    cols = _named(("pipeline", "text"), ("name_filter", "text"), ("split", "text"), ("labelled_rows", "int"),
                  ("gold_spans", "int"), ("tp", "int"), ("fp", "int"), ("fn", "int"), ("precision", "num", 3),
                  ("recall", "num", 3))
    return _tabular(data, "Precision of the person substitution", cols)


@builder("alttext_coverage", notebook=COVERAGE)
def alttext_coverage(data: Mapping[str, Any]) -> Table:
    """Per corpus and vocabulary: mentions, medians, classes at ≥K mentions per 1M captions, token/type
    ratio and mean words."""
    ks: Sequence[int] = _meta(data, "ks")
    cols = _named(("corpus", "text"), ("vocabulary", "text"), ("records", "int"), ("classes", "int"),
                  ("instances_total", "int"), ("median_per_class", "num", 1), ("per_million_median", "num", 1),
                  *[(f"classes_ge_{k}_per_M", "int") for k in ks], ("classes_mentioned", "int"),
                  ("token_type_ratio", "num", 1), ("avg_words", "num", 1))
    return _tabular(data, "Long-tail concept coverage", cols)


@builder("alttext_size_stats", notebook=COVERAGE)
def alttext_size_stats(data: Mapping[str, Any]) -> Table:
    """Size-dependent statistics with the corpus size, and size-matched (mean and sd over seeds)."""
    cols = _named(("corpus", "text"), ("captions", "int"), ("words", "int"), ("types", "int"), ("singletons", "int"),
                  ("token_type_ratio", "num", 1), ("matched_token_type_ratio_mean", "num", 2),
                  ("matched_token_type_ratio_sd", "num", 3), ("matched_types_mean", "num", 1),
                  ("matched_singletons_mean", "num", 1))
    return _tabular(data, "Size-dependent statistics, raw and size-matched", cols)


@builder("alttext_lvis_groups", notebook=COVERAGE)
def alttext_lvis_groups(data: Mapping[str, Any]) -> Table:
    """LVIS classes by frequency group: classes mentioned, mentions, medians."""
    cols = _named(("corpus", "text"), ("lvis_group", "text"), ("classes", "int"), ("mentioned", "int"),
                  ("instances", "int"), ("median_per_class", "num", 1), ("per_million_median", "num", 1))
    return _tabular(data, "LVIS coverage by frequency group", cols)


@builder("alttext_domains", notebook=COVERAGE)
def alttext_domains(data: Mapping[str, Any]) -> Table:
    """The most frequent image hosts per corpus."""
    cols = _named(("corpus", "text"), ("site", "text"), ("count", "int"), ("share", *SHARE), ("urls", "int"),
                  ("distinct_sites", "int"))
    return _tabular(data, "Image hosts per corpus", cols)


@builder("alttext_top_tokens", notebook=COVERAGE)
def alttext_top_tokens(data: Mapping[str, Any]) -> Table:
    """The most frequent tokens per corpus."""
    return _tabular(data, "Most frequent tokens per corpus",
                    _named(("corpus", "text"), ("rank", "int"), ("token", "text"), ("count", "int")))


@builder("alttext_hypernym_check", notebook=COVERAGE)
def alttext_hypernym_check(data: Mapping[str, Any]) -> Table:
    """Hypernyms of named entities in captions: share of captions, per 1k words, after "by"."""
    cols = _named(("corpus", "text"), ("records", "int"), ("share_with_hypernym", *SHARE),
                  ("hypernyms_per_1k_words", "num", 1), ("by_followed_by_hypernym", *SHARE), ("by_bigrams", "int"),
                  ("top_hypernyms", "text"))
    return _tabular(data, "Hypernyms in captions", cols)


@builder("alttext_nocaps_classes", notebook=COVERAGE)
def alttext_nocaps_classes(data: Mapping[str, Any]) -> Table:
    """Derivation of the nocaps out-of-domain vocabulary from the Open Images classes."""
    return _tabular(data, "The nocaps out-of-domain vocabulary", _named(("step", "text"), ("classes", "int")))


__all__ = ["alttext_coverage", "alttext_domains", "alttext_funnel", "alttext_funnel_side_by_side",
           "alttext_hypernym_check", "alttext_lvis_groups", "alttext_nocaps_classes", "alttext_person_substitution",
           "alttext_size_stats", "alttext_top_tokens", "alttext_transform_examples"]
