"""Selection strategies: order with ties, missing scores, K/T resolution, seeded random, export."""

from __future__ import annotations

import json

import pytest

from capaudit.detail.export import export_subset, output_paths, sample_keys
from capaudit.detail.selection import (STRATEGIES, TIE_BREAK_RULE, parse_count, rank, resolve_count, select,
                                      subset_stats, tie_order)
from capaudit.errors import FieldNotFoundError, InputError

#        itm    cd    length  icr   aod   cd_unnormalized
ROWS = [
    dict(id="a", itm=0.9, cd=0.1, length=10, icr=0.2, aod=1.0, cd_unnormalized=0.2),
    dict(id="b", itm=0.9, cd=0.3, length=12, icr=0.5, aod=2.0, cd_unnormalized=1.0),
    dict(id="c", itm=0.5, cd=0.9, length=30, icr=0.9, aod=3.0, cd_unnormalized=2.7),
    dict(id="d", itm=None, cd=0.8, length=5, icr=0.4, aod=1.0, cd_unnormalized=0.4),
    dict(id="e", itm=0.9, cd=0.3, length=8, icr=0.1, aod=3.0, cd_unnormalized=0.3),
    dict(id="f", itm=0.7, cd=None, length=20, icr=None, aod=0.5, cd_unnormalized=None),
]


def ids(sel):
    return [ROWS[i]["id"] for i in sel.indices]


def test_rank_ties_keep_input_order_and_none_last():
    assert rank([0, 1, 2, 3, 4], [0.9, 0.9, None, 1.0, 0.9]) == [3, 0, 1, 4, 2]
    assert rank([4, 1, 0], [0.5, 0.5, 0.5, None, 0.5]) == [4, 1, 0]


def test_itm_cd_method_order_with_ties():
    # ITM ranking: a, b, e (0.9 tie; seed 0's hash order is a, b, e), f (0.7), c (0.5), d (None);
    # K=4 keeps a, b, e, f. CD among them: b 0.3, e 0.3 (tie -> ITM-stage order), a 0.1, f None.
    assert [ROWS[i]["id"] for i in tie_order(ROWS, 0) if ROWS[i]["itm"] == 0.9] == ["a", "b", "e"]
    assert ids(select(ROWS, "itm_cd", k=4, t=2)) == ["b", "e"]
    assert ids(select(ROWS, "itm_cd", k=4, t=4)) == ["b", "e", "a", "f"]
    assert ids(select(ROWS, "itm_cd", k=2, t=2)) == ["b", "a"]


def test_baselines_and_ablations():
    assert ids(select(ROWS, "full")) == ["a", "b", "c", "d", "e", "f"]
    assert ids(select(ROWS, "length", t=2)) == ["c", "f"]
    assert ids(select(ROWS, "itm", t=2)) == ["a", "b"]
    assert ids(select(ROWS, "itm_length", k=4, t=2)) == ["f", "b"]
    assert ids(select(ROWS, "itm_icr", k=4, t=3)) == ["b", "a", "e"]
    assert ids(select(ROWS, "itm_aod", k=4, t=2)) == ["e", "b"]
    assert ids(select(ROWS, "icr_aod", t=3)) == ["c", "d", "b"]  # CD over all, no ITM pruning
    assert ids(select(ROWS, "itm_cd_unnorm", k=4, t=2)) == ["b", "e"]
    assert set(STRATEGIES) == {"full", "random", "length", "itm", "itm_length", "itm_cd", "itm_icr", "itm_aod",
                               "icr_aod", "itm_cd_unnorm"}


def test_random_is_seeded_and_in_input_order():
    a = select(ROWS, "random", t=3, seed=7)
    assert a.indices == select(ROWS, "random", t=3, seed=7).indices
    assert list(a.indices) == sorted(a.indices) and len(a.indices) == 3
    draws = {select(ROWS, "random", t=3, seed=s).indices for s in range(20)}
    assert len(draws) > 1
    assert a.seed == 7 and select(ROWS, "itm", t=1, seed=7).seed is None


def test_counts_and_proportions():
    assert resolve_count(0.5, 6, "k") == 3 and resolve_count(0.34, 6, "t") == 2 and resolve_count(1.0, 6, "k") == 6
    assert resolve_count(30000, 6, "k") == 6 and resolve_count(None, 6, "k") is None
    assert parse_count("30000") == 30000 and parse_count("0.6") == 0.6
    sel = select(ROWS, "itm_cd", k=0.5, t=0.34)
    assert (sel.k, sel.t) == (3, 2) and ids(sel) == ["b", "e"]
    for bad in (0.0, 1.5, -1, True):
        with pytest.raises(InputError):
            resolve_count(bad, 6, "k")
    with pytest.raises(InputError):
        parse_count("many")


def test_errors():
    with pytest.raises(InputError, match="must not exceed K"):
        select(ROWS, "itm_cd", k=2, t=3)
    with pytest.raises(InputError, match="needs K"):
        select(ROWS, "itm_cd", t=2)
    with pytest.raises(InputError, match="needs T"):
        select(ROWS, "length")
    with pytest.raises(InputError, match="unknown strategy"):
        select(ROWS, "best")
    with pytest.raises(FieldNotFoundError, match="'clip'"):
        select(ROWS, "itm_cd", k=2, t=1, itm_field="clip")
    bad = [dict(r) for r in ROWS]
    bad[2]["itm"] = "high"
    with pytest.raises(InputError, match=r"row 3.*'itm'|'itm'.*row 3"):
        select(bad, "itm", t=1, where="s.jsonl")


def test_subset_stats():
    st = subset_stats(ROWS, select(ROWS, "itm_cd", k=4, t=2))
    assert st["avg_icr"] == pytest.approx(0.3) and st["avg_aod"] == pytest.approx(2.5)
    assert st["avg_length"] == pytest.approx(10.0) and st["avg_itm"] == pytest.approx(0.9)
    full = subset_stats(ROWS, select(ROWS, "full"))
    assert full["avg_icr"] == pytest.approx((0.2 + 0.5 + 0.9 + 0.4 + 0.1) / 5)  # null ICR left out


def test_export_jsonl_parquet_manifest(tmp_path):
    import pyarrow.parquet as pq

    rows = [dict(r, image=f"/imgs/{r['id']}.jpg", caption=f"caption {r['id']}") for r in ROWS]
    rows[1]["id"] = "x.1"
    rows[4]["id"] = "x_1"
    sel = select(rows, "itm_cd", k=4, t=3)
    paths = export_subset(rows, sel, tmp_path / "subset.jsonl", backends={"itm": "annotation-precision"})
    assert paths == output_paths(tmp_path / "subset.jsonl")
    lines = [json.loads(x) for x in paths["jsonl"].read_text().splitlines()]
    assert [r["rank"] for r in lines] == [1, 2, 3] and [r["source_row"] for r in lines] == [1, 4, 0]
    assert [r["__key__"] for r in lines] == ["x_1", "x_1-2", "a"]
    table = pq.read_table(paths["parquet"]).to_pylist()
    assert [t["id"] for t in table] == ["x.1", "x_1", "a"] and table[0]["image"] == "/imgs/b.jpg"
    assert table[0]["cd"] == pytest.approx(0.3) and table[2]["itm"] == pytest.approx(0.9)
    man = json.loads(paths["manifest"].read_text())
    assert man["format"] == "webdataset-manifest/1" and man["selection"]["strategy"] == "itm_cd"
    assert man["selection"]["k"] == 4 and man["backends"] == {"itm": "annotation-precision"}
    assert man["samples"][0] == {"__key__": "x_1", "jpg": "/imgs/b.jpg", "txt": "caption b",
                                 "json": {**{k: rows[1][k] for k in ("id", "icr", "aod", "cd", "cd_unnormalized",
                                                                       "length", "itm")},
                                          "rank": 1, "source_row": 1, "objects": None, "attributes": None,
                                          "relations": None, "icr_kind": None, "relation_ends": None}}
    assert man["files"]["parquet"]["rows"] == 3 and len(man["files"]["jsonl"]["sha256"]) == 64


def test_export_names_icr_kind_and_relation_ends(tmp_path):
    import pyarrow.parquet as pq

    rows = [dict(r, image=f"{r['id']}.jpg", caption="c", icr_kind="things-only", relation_ends="subject") for r in ROWS]
    paths = export_subset(rows, select(rows, "itm_cd", k=4, t=3), tmp_path / "s.jsonl")
    table = pq.read_table(paths["parquet"]).to_pylist()
    assert {(t["icr_kind"], t["relation_ends"]) for t in table} == {("things-only", "subject")}
    man = json.loads(paths["manifest"].read_text())
    assert {(x["json"]["icr_kind"], x["json"]["relation_ends"]) for x in man["samples"]} == {("things-only", "subject")}


def test_sample_keys():
    assert sample_keys(["a.b", "a_b", "a/b", "", 3]) == ["a_b", "a_b-2", "a_b-3", "_", "3"]


def _tied_pool(n: int = 40):
    """Most rows at ITM 1.0 (as the annotation-precision stand-in gives), distinct CD."""
    return [dict(id=f"img{i:02d}", itm=1.0 if i % 8 else 0.5, cd=(i * 37 % n) / n, length=10) for i in range(n)]


def test_itm_ties_follow_a_seeded_rule_not_the_file_order():
    rows = _tied_pool()
    tied = sum(r["itm"] == 1.0 for r in rows)                      # 35 of 40
    sel = select(rows, "itm_cd", k=10, t=5, seed=0)
    assert sel.itm_ties == tied
    assert sel.ties[0].to_dict() == {"stage": "pruning", "score": "itm", "cut": 10, "candidates": 40,
                                     "cut_score": 1.0, "tied": tied, "kept_of_tied": 10,
                                     "decided_by_tie_order": True}
    d = sel.to_dict()
    assert d["itm_ties"] == tied and d["tie_break"] == {"rule": TIE_BREAK_RULE, "seed": 0}
    chosen = {rows[i]["id"] for i in sel.indices}
    # the file order no longer decides: reversed and interleaved files select the same rows
    for perm in (rows[::-1], rows[1::2] + rows[::2]):
        again = select(perm, "itm_cd", k=10, t=5, seed=0)
        assert {perm[i]["id"] for i in again.indices} == chosen and again.itm_ties == tied
    # top 10 by ITM = the first 10 tied rows in the seeded order, not the first 10 of the file
    top = [rows[i]["id"] for i in select(rows, "itm", t=10, seed=0).indices]
    assert top == [rows[i]["id"] for i in tie_order(rows, 0) if rows[i]["itm"] == 1.0][:10]
    assert top != [r["id"] for r in rows if r["itm"] == 1.0][:10]
    # another seed, another draw among the tied rows
    assert len({frozenset(rows[i]["id"] for i in select(rows, "itm_cd", k=10, t=5, seed=s).indices)
                for s in range(5)}) > 1


def test_tie_order_is_a_seeded_hash_of_the_id():
    import hashlib

    rows = _tied_pool(12)
    want = sorted(range(12), key=lambda i: hashlib.sha256(f"3:{rows[i]['id']}".encode()).hexdigest())
    assert tie_order(rows, 3) == want
    no_ids = [{"caption": f"c{i}", "itm": 1.0} for i in range(6)]
    assert sorted(tie_order(no_ids, 0)) == list(range(6)) and tie_order(no_ids, 0) == tie_order(no_ids, 0)
    assert select(ROWS, "full").ties == () and select(ROWS, "length", t=2).itm_ties is None
