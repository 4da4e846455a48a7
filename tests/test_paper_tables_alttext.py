"""The alt-text stage's tables (``paper.tables_alttext``) from hand-written rows files: whole booktabs
tabulars with the row keys as header, the note, one number format per quantity, ``--`` for missing."""

from __future__ import annotations

import pytest

from capaudit.errors import InputError
from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import build_table, known_tables
from capaudit.summaries.table_rows import read_table_rows, write_table_rows

NOTE = "offline backends: langid 1.1.6, spaCy en_core_web_sm"


def _build(tmp_path, table, rows, **meta):
    p = write_table_rows(tmp_path, table, "alttext_x", rows, function=f"capaudit.alttext.x.{table}", inputs=["in"],
                         meta={"note": NOTE, **meta})
    return build_table({**read_table_rows(p), "path": str(p)}, run_dir=tmp_path)


def _lines(t):
    tex = to_latex(t).splitlines()
    assert tex[0].startswith("% ")  # the note
    assert r"\toprule" in tex and tex[-1] == r"\end{tabular}"
    return tex


def test_every_table_has_a_builder_for_its_notebook():
    known = known_tables()
    for t in ("alttext_funnel", "alttext_funnel_*", "alttext_transform_examples",
              "alttext_person_substitution"):
        assert known[t] == "10_alttext_filters", t
    for t in ("alttext_coverage", "alttext_size_stats", "alttext_lvis_groups", "alttext_domains", "alttext_top_tokens",
              "alttext_hypernym_check", "alttext_nocaps_classes"):
        assert known[t] == "10b_concept_coverage", t


def test_funnel_steps(tmp_path):
    rows = [{"corpus": "raw_1", "pipeline": "cc3m", "order": 1, "rule": "image_format", "block": "image_format",
             "kind": "filter", "rows_in": 10000, "dropped": 668, "kept": 9332, "unchecked": 764, "changed": 0,
             "backend": "rule", "kept_share_of_input": 0.9332},
            {"corpus": "empty", "pipeline": "cc3m", "order": 0, "rule": "empty_text", "block": "input", "kind": "input",
             "rows_in": 0, "dropped": 0, "kept": 0, "unchecked": 0, "changed": 0, "backend": "built-in",
             "kept_share_of_input": None}]
    tex = _lines(_build(tmp_path, "alttext_funnel", rows))
    assert tex[0] == f"% {NOTE}" and tex[1] == r"\begin{tabular}{llrlllrrrrrlr}"
    assert tex[3] == (r"corpus & pipeline & order & rule & block & kind & rows\_in & dropped & kept & unchecked & "
                      r"changed & backend & kept\_share\_of\_input \\")
    assert (r"raw\_1 & cc3m & $1$ & image\_format & image\_format & filter & $10{,}000$ & $668$ & $9{,}332$ & $764$ & "
            r"$0$ & rule & $93.32\%$ \\") in tex
    assert tex[6].endswith(r"& built-in & -- \\")  # no input: no share, never 0


def test_funnel_side_by_side_columns_follow_the_pipelines(tmp_path):
    rows = [{"rule": "capitalisation", "cc12m dropped": None, "cc12m kept": None, "cc3m dropped": 85, "cc3m kept": 531}]
    t = _build(tmp_path, "alttext_funnel_coco_mini", rows, corpus="coco_mini", pipelines=["cc12m", "cc3m"])
    tex = _lines(t)
    assert tex[:2] == [f"% {NOTE}", "% --: the rule is not part of that cascade"]
    assert r"rule & cc12m dropped & cc12m kept & cc3m dropped & cc3m kept \\" in tex
    assert r"capitalisation & -- & -- & $85$ & $531$ \\" in tex
    assert to_csv(t).splitlines() == ["rule,cc12m dropped,cc12m kept,cc3m dropped,cc3m kept", "capitalisation,,,85,531"]


def test_funnel_side_by_side_of_any_corpus(tmp_path):
    t = _build(tmp_path, "alttext_funnel_my_corpus", [{"rule": "r", "p dropped": 1, "p kept": 2}], corpus="my_corpus",
               pipelines=["p"])
    assert t.title == "Filter funnel on my_corpus" and t.provenance.notebook == "10_alttext_filters"
    assert "r & $1$ & $2$ " + "\\\\" in to_latex(t)


def test_examples_are_escaped_text(tmp_path):
    tex = _lines(_build(tmp_path, "alttext_transform_examples", [
        {"corpus": "c", "pipeline": "cc3m", "original": "Cotton 100% #1 {x} $5", "transformed": "Cotton ###% {x} $#"}]))
    assert r"c & cc3m & Cotton 100\% \#1 \{x\} \$5 & Cotton \#\#\#\% \{x\} \$\# \\" in tex


def test_person_substitution_shows_ten_columns_csv_keeps_all(tmp_path):
    rows = [{"pipeline": "cc12m", "block": "person_substitution", "chosen": True, "precision": 0.5, "recall": None,
             "tp": 16, "fp": 16, "fn": 5, "gold_spans": 21, "labelled_rows": 100, "match_rule": "overlap",
             "split": "held_out", "name_filter": "name_shape", "labels": "shipped"}]
    t = _build(tmp_path, "alttext_person_substitution", rows, note="match rule overlap")
    tex = to_latex(t).splitlines()
    assert tex[0] == "% match rule overlap" and tex[1] == r"\begin{tabular}{lllrrrrrrr}"
    assert r"cc12m & name\_shape & held\_out & $100$ & $21$ & $16$ & $16$ & $5$ & $0.500$ & -- \\" in tex
    assert to_csv(t).splitlines()[0] == ("pipeline,block,chosen,precision,recall,tp,fp,fn,gold_spans,labelled_rows,"
                                         "match_rule,split,name_filter,labels")


def test_coverage_columns_from_the_contract_ks(tmp_path):
    row = {"corpus": "a:b", "vocabulary": "lvis", "records": 15833, "classes": 1203, "instances_total": 13389,
           "median_per_class": 1.0, "per_million_median": 63.16, "classes_ge_1_per_M": 718, "classes_ge_10_per_M": 566,
           "classes_mentioned": 718, "token_type_ratio": 14.21, "avg_words": None}
    tex = _lines(_build(tmp_path, "alttext_coverage", [row], ks=[1, 10]))
    assert tex[1] == r"\begin{tabular}{llrrrrrrrrrr}"
    assert (r"corpus & vocabulary & records & classes & instances\_total & median\_per\_class & per\_million\_median & "
            r"classes\_ge\_1\_per\_M & classes\_ge\_10\_per\_M & classes\_mentioned & token\_type\_ratio & avg\_words \\") in tex
    assert (r"a:b & lvis & $15{,}833$ & $1{,}203$ & $13{,}389$ & $1.0$ & $63.2$ & $718$ & $566$ & $718$ & $14.2$ & -- \\"
            in tex)


def test_size_stats_and_missing_matched_values(tmp_path):
    rows = [{"corpus": "big", "captions": 15833, "words": 153693, "types": 10814, "singletons": 4182,
             "token_type_ratio": 14.212, "matched_n": 5000, "matched_token_type_ratio_mean": 2.8512,
             "matched_token_type_ratio_sd": 0.04931, "matched_types_mean": 1757.7, "matched_singletons_mean": 1165.4,
             "note": ""},
            {"corpus": "small", "captions": 7, "words": 49, "types": 35, "singletons": 26, "token_type_ratio": 1.4,
             "matched_n": 5000, "matched_token_type_ratio_mean": None, "matched_token_type_ratio_sd": None,
             "matched_types_mean": None, "matched_singletons_mean": None, "note": "corpus has 49 tokens < n = 5000"}]
    tex = _lines(_build(tmp_path, "alttext_size_stats", rows, note="n = 5,000 tokens"))
    assert r"big & $15{,}833$ & $153{,}693$ & $10{,}814$ & $4{,}182$ & $14.2$ & $2.85$ & $0.049$ & $1757.7$ & $1165.4$ \\" in tex
    assert r"small & $7$ & $49$ & $35$ & $26$ & $1.4$ & -- & -- & -- & -- \\" in tex


def test_small_coverage_tables(tmp_path):
    lvis = _lines(_build(tmp_path, "alttext_lvis_groups", [
        {"corpus": "c", "lvis_group": "r", "classes": 337, "mentioned": 112, "instances": 419, "median_per_class": 0.0,
         "per_million_median": 0.0}]))
    assert r"c & r & $337$ & $112$ & $419$ & $0.0$ & $0.0$ \\" in lvis
    dom = _lines(_build(tmp_path, "alttext_domains", [
        {"corpus": "c", "site": "alamy.com", "count": 2591, "share": 0.16364, "urls": 15833, "distinct_sites": 2691}]))
    assert r"c & alamy.com & $2{,}591$ & $16.36\%$ & $15{,}833$ & $2{,}691$ \\" in dom
    tok = _lines(_build(tmp_path, "alttext_top_tokens", [{"corpus": "c", "rank": 1, "token": "the", "count": 10319}]))
    assert tok[1] == r"\begin{tabular}{lrlr}" and r"c & $1$ & the & $10{,}319$ \\" in tok
    hyp = _lines(_build(tmp_path, "alttext_hypernym_check", [
        {"corpus": "c", "records": 35, "share_with_hypernym": 0.1714, "hypernyms_per_1k_words": 17.8,
         "by_followed_by_hypernym": None, "by_bigrams": 0, "top_hypernyms": "country 2, city 1"}]))
    assert r"c & $35$ & $17.14\%$ & $17.8$ & -- & $0$ & country 2, city 1 \\" in hyp
    noc = _lines(_build(tmp_path, "alttext_nocaps_classes", [{"step": "nocaps_ood", "classes": 511}],
                        note="derived from class_lists + oi_coco_mapping.yaml"))
    assert noc[0] == "% derived from class_lists + oi_coco_mapping.yaml" and r"nocaps\_ood & $511$ \\" in noc


def test_rows_without_their_note_are_refused(tmp_path):
    p = write_table_rows(tmp_path, "alttext_top_tokens", "x", [{"corpus": "c", "rank": 1, "token": "a", "count": 2}],
                         function="m.f")
    with pytest.raises(InputError, match="no meta 'note'") as e:
        build_table({**read_table_rows(p), "path": str(p)})
    assert e.value.field == "meta.note"
