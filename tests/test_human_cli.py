"""``capaudit human …`` command lines: the agreement contract and the study lifecycle."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from capaudit.cli import main
from capaudit.human.simulate import synthetic_judged_claims


def _labels(path: Path, rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "rater", "label"])
        w.writerows(rows)
    return path


def test_agreement_contract_hand_computed(tmp_path: Path, capsys) -> None:
    pairs = [("yes", "yes")] * 4 + [("yes", "no")] * 1 + [("no", "yes")] * 2 + [("no", "no")] * 3 + \
            [("uncertain", "yes")] * 1 + [("uncertain", "uncertain")] * 1
    rows = []
    for i, (a, b) in enumerate(pairs):
        rows += [(f"i{i}", "alice", a), (f"i{i}", "bob", b)]
    rows.append(("only-one", "alice", "yes"))  # labelled by one rater: not counted
    out = tmp_path / "agreement.json"
    assert main(["human", "agreement", "--labels", str(_labels(tmp_path / "l.csv", rows)), "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert set(got) == {"nominal", "binary"}
    nom, b = got["nominal"], got["binary"]
    # nominal over 12 items: 8 equal (4 yes-yes, 3 no-no, 1 unc-unc); A: 5 yes 5 no 2 unc; B: 7 yes 4 no 1 unc
    assert nom["n"] == 12 and nom["exact"] == pytest.approx(8 / 12)
    pe = (5 * 7 + 5 * 4 + 2 * 1) / 144
    assert nom["cohen_kappa"] == pytest.approx((8 / 12 - pe) / (1 - pe))
    pi = [(5 + 7) / 24, (5 + 4) / 24, (2 + 1) / 24]
    pe3 = sum(p * (1 - p) for p in pi) / 2  # q = 3
    assert nom["gwet_ac1"] == pytest.approx((8 / 12 - pe3) / (1 - pe3))
    # binary: drop the 2 items with an uncertain; a=4, b=1, c=2, d=3 over 10
    assert (b["n"], b["abstentions"]) == (10, 2)
    assert b["exact"] == pytest.approx(0.7)
    pe_b = (5 / 10) * (6 / 10) + (5 / 10) * (4 / 10)
    assert b["cohen_kappa"] == pytest.approx((0.7 - pe_b) / (1 - pe_b))
    pi_yes = (5 + 6) / 20
    pe2 = 2 * pi_yes * (1 - pi_yes)  # q = 2
    assert b["gwet_ac1"] == pytest.approx((0.7 - pe2) / (1 - pe2))
    assert b["positive_agreement"] == pytest.approx(8 / 11)  # 2a / (2a + b + c)
    assert b["negative_agreement"] == pytest.approx(6 / 9)  # 2d / (2d + b + c)
    assert list(b) == ["n", "exact", "cohen_kappa", "gwet_ac1", "positive_agreement", "negative_agreement",
                       "abstentions"]


@pytest.mark.parametrize("rows,header,message", [
    ([("i1", "a", "maybe"), ("i1", "b", "yes")], None, "l.csv:2 field 'label'"),
    ([("i1", "a", "yes"), ("i1", "a", "no")], None, "l.csv:3 field 'item_id'"),
    ([("i1", "a", "yes"), ("i1", "b", "no"), ("i1", "c", "no")], None, "l.csv:4 field 'rater'"),
    ([("i1", "a", "yes"), ("i2", "b", "no")], None, "no item was labelled by both raters"),
    ([("i1", "a", "yes")], None, "exactly two raters"),
    ([("i1", "", "yes")], None, "l.csv:2 field 'rater'"),
    ([("i1", "a", "yes")], ["item", "rater", "label"], "l.csv:1 field 'item_id'"),
])
def test_agreement_bad_input_is_one_clear_line(tmp_path: Path, capsys, rows, header, message: str) -> None:
    p = tmp_path / "l.csv"
    with open(p, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header or ["item_id", "rater", "label"])
        w.writerows(rows)
    assert main(["human", "agreement", "--labels", str(p), "--out", str(tmp_path / "o.json")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o.json").exists()


def test_lifecycle_commands_print_the_database(tmp_path: Path, capsys) -> None:
    jc = synthetic_judged_claims(tmp_path / "jc.jsonl", n_images=20)
    cfg = tmp_path / "study.yaml"
    cfg.write_text("study_id: cli-study\nclaims_per_stratum: 2\nrequire_all_strata: false\ntarget_items: 30\n"
                   "max_items: 40\n", encoding="utf-8")
    db = tmp_path / "study.sqlite"
    d = ["--db", str(db)]
    assert main(["human", "init", *d, "--config", str(cfg)]) == 0
    assert f"study database: {db.resolve()}" in capsys.readouterr().err
    assert main(["human", "sample", *d, "--judged-claims", str(jc)]) == 0
    assert main(["human", "seal", *d]) == 0
    assert main(["human", "sample", *d, "--judged-claims", str(jc)]) == 1
    assert "sealed study cannot be re-sampled" in capsys.readouterr().err
    inv = tmp_path / "invites.csv"
    assert main(["human", "invite", *d, "--count", "2", "--out", str(inv)]) == 0
    assert oct(inv.stat().st_mode & 0o777) == "0o600"
    codes = list(csv.DictReader(open(inv, encoding="utf-8")))
    assert [c["pseudonym"] for c in codes] == ["P001", "P002"] and len(codes[0]["invite_code"]) == 19
    assert main(["human", "assign", *d]) == 0
    assert main(["human", "open", *d]) == 0
    capsys.readouterr()
    assert main(["human", "status", *d]) == 0
    out = capsys.readouterr()
    assert "study database:" in out.err and "readiness: not ready" in out.out and "caption" in out.out
    assert main(["human", "status", *d, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "open"
    assert main(["human", "backup", *d, "--out", str(tmp_path / "b.sqlite")]) == 0
    assert (tmp_path / "b.sqlite").is_file()
    assert main(["human", "export", *d, "--out", str(tmp_path / "exp")]) == 0
    assert (tmp_path / "exp" / "human_study_export.json").is_file()
    assert main(["human", "adjudicate", *d, "--list"]) == 0
    assert main(["human", "adjudicate", *d, "--item", "x"]) == 1
    capsys.readouterr()
    assert main(["human", "serve", *d, "--dry-run", "--port", "8899"]) == 1  # a real study without its launch seal
    assert "not sealed for launch" in capsys.readouterr().err
    assert main(["human", "serve", *d, "--dry-run", "--port", "8899", "--allow-unsealed"]) == 0
    out = capsys.readouterr()
    assert "http://127.0.0.1:8899/" in out.err and "--Voila.ip=127.0.0.1" in out.out
    assert main(["human", "close", *d]) == 0
    assert main(["human", "status", "--db", str(tmp_path / "missing.sqlite")]) == 1
    assert "no study database" in capsys.readouterr().err


def test_export_and_agreement_give_one_cohen_kappa(tmp_path: Path, capsys) -> None:
    """Same labels, same Cohen's κ from ``human agreement`` and ``human export`` (= scikit-learn's);
    the pooled-marginal κ of the export is reported as Fleiss' κ, not as Cohen's."""
    from sklearn.metrics import cohen_kappa_score

    from capaudit.human.simulate import fixture_study
    from capaudit.stats.agreement import fleiss_kappa

    st, _, sims = fixture_study(tmp_path, n_images=20, humans=0, simulated=2, mode="simulated")
    pattern = [("yes", "yes"), ("yes", "no"), ("no", "no"), ("uncertain", "yes"), ("yes", "yes"), ("no", "yes"),
               ("yes", "yes"), ("no", "no"), ("uncertain", "uncertain"), ("yes", "no"), ("no", "no")]
    caption = {"caption_licensed": "yes", "atomic_visual_claim": "yes", "category_check": "correct"}
    order = {}
    rows = []
    for r, inv in enumerate(sims):
        s = st.login(inv.code)
        s.give_consent()
        for t in s.tasks(refresh=True):
            if t.phase == "caption":
                s.record(t.item_id, "caption", caption)
            elif t.phase == "image":
                k = order.setdefault(t.item_id, len(order))
                label = pattern[k % len(pattern)][r]
                s.record(t.item_id, "image", {"image_support": label})
                rows.append((t.item_id, s.pseudonym, label))
    db = st.path
    st.close()
    assert len(rows) == 2 * len(order) >= 20  # both raters labelled every item
    agreement_json = tmp_path / "agreement.json"
    assert main(["human", "agreement", "--labels", str(_labels(tmp_path / "l.csv", rows)),
                 "--out", str(agreement_json)]) == 0
    assert main(["human", "export", "--db", str(db), "--out", str(tmp_path / "exp"), "--n-resamples", "200"]) == 0
    two = json.loads(agreement_json.read_text())
    hh = json.loads((tmp_path / "exp" / "human_study_export.json").read_text())["human_human"]["image_support"]
    ra, rb = sorted({p for _, p, _ in rows})
    by = {(i, p): lab for i, p, lab in rows}
    a = [by[(i, ra)] for i in order]
    b = [by[(i, rb)] for i in order]
    assert hh["nominal"]["cohen_kappa"] == pytest.approx(two["nominal"]["cohen_kappa"], abs=1e-12)
    assert hh["nominal"]["cohen_kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    kept = [(x, y) for x, y in zip(a, b) if "uncertain" not in (x, y)]
    sk_binary = cohen_kappa_score([x for x, _ in kept], [y for _, y in kept])
    assert hh["binary"]["cohen_kappa"] == pytest.approx(two["binary"]["cohen_kappa"], abs=1e-12)
    assert hh["binary"]["cohen_kappa"] == pytest.approx(sk_binary, abs=1e-12)
    # the pooled-marginal κ is named for what it is, and differs here
    per_item = {}
    for item, _, lab in rows:
        per_item.setdefault(item, []).append(lab)
    assert hh["nominal"]["fleiss_kappa"] == pytest.approx(fleiss_kappa(per_item), abs=1e-12)
    assert abs(hh["nominal"]["fleiss_kappa"] - hh["nominal"]["cohen_kappa"]) > 1e-4
    assert hh["raters"] == 2 and hh["n_items"] == len(order)


def test_readme_init_with_db_and_params(tmp_path: Path, capsys) -> None:
    """``capaudit human init --db S.sqlite --params params/demo.yaml`` (README): the database goes to --db,
    the settings come from the params file's ``human`` section."""
    import yaml

    from capaudit.human.study import Study

    params = Path(__file__).resolve().parents[1] / "params" / "demo.yaml"
    db = tmp_path / "S.sqlite"
    assert main(["human", "init", "--db", str(db), "--params", str(params)]) == 0
    assert f"study database: {db.resolve()}" in capsys.readouterr().err
    section = yaml.safe_load(params.read_text(encoding="utf-8"))["human"]
    with Study.load(db) as st:
        assert st.study_id == section["study_id"] and st.mode == section["mode"]
        assert st.config.claims_per_stratum == section["claims_per_stratum"]
    assert main(["human", "status", "--db", str(db), "--params", str(params), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["db"] == str(db.resolve())


def test_export_refuses_zero_resamples(tmp_path: Path) -> None:
    from capaudit.errors import InputError
    from capaudit.human.export import export_study
    from capaudit.human.simulate import fixture_study

    st, _, _ = fixture_study(tmp_path, n_images=8, humans=1)
    with st, pytest.raises(InputError, match="n_resamples"):
        export_study(st, tmp_path / "out", n_resamples=0)
    assert not (tmp_path / "out").exists()
