"""Human-verification tables through the paper's table model: columns, notes, missing values."""

from __future__ import annotations

from pathlib import Path

from capaudit.human.demo_report import write_report_rows
from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import stage_table

AGREE = {"judge": "judge_a", "surface_group": "all", "estimate": 0.8125, "lower": 0.75, "upper": 0.875,
         "bootstrap_mean": 0.81, "bootstrap_std": 0.03, "n_records": 1200, "n_clusters": 40, "n_resamples": 300,
         "seed": 0, "labels": "people"}


def _corrected(status: str = "ok", scope: str = "surface", **kw) -> dict:
    est = {f"{p}_{k}": None for p in ("ppi", "human")
           for k in ("share", "share_lo", "share_hi", "share_se", "cap", "cap_lo", "cap_hi", "cap_se", "lam")}
    if status == "ok":
        est.update(ppi_cap=1.234, ppi_cap_lo=1.0, ppi_cap_hi=1.5, ppi_lam=0.8, human_cap=1.1, human_cap_lo=0.9,
                   human_cap_hi=1.3, human_lam=0.0)
    row = {"judge": "judge_a", "scope": scope, "surface_group": "g", "surface": "coco_a" if scope == "surface" else "all",
           "status": status, "claims": 10, "captions": 5, "judge_yes": 7, "judge_share": 0.7, "judge_cap": 1.4,
           "judge_cap_all_rows": 1.4, "sampled": 6, "labelled": 5, "labelled_yes": 4, "strata": 2,
           "strata_collapsed": 0, "level": 0.9, "labels": "people", "excluded": "uncertain=1", "excluded_total": 1, **est}
    row.update(kw)
    return row


def test_agreement_table_columns_notes_and_missing(tmp_path: Path) -> None:
    rows = [AGREE, {**AGREE, "surface_group": "coco_a", "estimate": None, "upper": None}]
    paths = write_report_rows(rows, [], tmp_path, simulated=False)
    table = stage_table(paths["agreement"])
    lines = to_latex(table).splitlines()
    assert lines[0] == "% judge-human weighted exact agreement (image-cluster bootstrap, percentile 95% interval)"
    assert lines[1] == ("% columns: Judge & Surface group & Agreement & 95\\% interval & Claims & Image clusters & "
                        "Labels")
    assert lines[2] == r"judge\_a & all & $0.812$ & [0.750, 0.875] & $1{,}200$ & $40$ & people \\"
    assert lines[3] == r"judge\_a & coco\_a & -- & -- & $1{,}200$ & $40$ & people \\"
    assert to_csv(table).splitlines()[0] == ("judge,surface_group,estimate,lower,upper,bootstrap_mean,bootstrap_std,"
                                             "n_records,n_clusters,n_resamples,seed,labels")


def test_agreement_table_of_simulated_annotators_carries_the_caveat(tmp_path: Path) -> None:
    paths = write_report_rows([{**AGREE, "labels": "simulated annotators"}], [], tmp_path, simulated=True)
    tex = to_latex(stage_table(paths["agreement"]))
    assert "\n% simulated annotators: human labels are SIMULATED annotators, not people\n" in tex


def test_corrected_table_columns_notes_status_and_missing(tmp_path: Path) -> None:
    rows = [_corrected(), _corrected("too_few_labels"), _corrected(scope="surface_group"),
            _corrected(judge_cap=None, ppi_lam=None)]
    paths = write_report_rows([], rows, tmp_path, simulated=False)
    table = stage_table(paths["corrected"])
    assert len(table.columns) == 11
    lines = to_latex(table).splitlines()
    assert lines[0] == ("% supported CBU per caption corrected by people: weighted PPI++ (tuned lambda) and human-only "
                        "weighted estimates, 90% t intervals; CBU/cap = share x claims / captions with a judged claim")
    assert lines[1] == ("% columns: Judge & Surface & Judge CBU/cap & Corrected CBU/cap & Interval & Human-only CBU/cap & "
                        "Interval & $\\lambda$ & Labelled & Left out & Labels")
    assert lines[2] == (r"judge\_a & coco\_a & $1.40$ & $1.23$ & [1.00, 1.50] & $1.10$ & [0.90, 1.30] & $0.80$ & $5$ & "
                        r"$1$ & people \\")
    assert lines[3] == r"judge\_a & coco\_a & $1.40$ & -- & too few labels & -- & -- & -- & $5$ & $1$ & people \\"
    assert lines[4].startswith(r"judge\_a & g (all) & $1.40$ & $1.23$ & ")
    assert lines[5].startswith(r"judge\_a & coco\_a & -- & $1.23$ & [1.00, 1.50] & $1.10$ & [0.90, 1.30] & -- & ")
    csv = to_csv(table).splitlines()
    assert csv[0].split(",") == list(rows[0]) and "surface_label" not in csv[0]
