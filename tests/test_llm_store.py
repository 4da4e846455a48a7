"""ResponseStore: append-only JSONL, torn tails, sharding, order-independent merge (§13.5)."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from capaudit.errors import LockHeldError
from capaudit.llm.store import ResponseStore, iter_rows, merge, merge_lines, scan_ids


def row(rid, ok, started="2026-01-01T00:00:00.000Z", **kw):
    base = {"request_id": rid, "ok": ok, "status": 200 if ok else 500, "attempts": 1, "started_at": started,
            "elapsed_sec": 0.1, "model": "m", "usage": None, "response_text": "{}" if ok else None,
            "parsed": {} if ok else None, "error": None if ok else "boom", "error_kind": None if ok else "http"}
    base.update(kw)
    return base


def write(path, rows):
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def test_append_scan_and_reopen(tmp_path):
    p = tmp_path / "sub" / "resp.jsonl"
    with ResponseStore(p, batch_rows=2) as st:
        st.append(row("a", True))
        st.append(row("b", False))
        st.append(row("c", False))
        assert st.rows_written == 2  # one batch flushed, one row buffered
    assert st.rows_written == 3
    st2 = ResponseStore(p)
    assert st2.answered_ids() == {"a"} and st2.failed_ids() == {"b", "c"}
    st2.append(row("b", True, started="2026-01-02T00:00:00.000Z"))
    assert st2.failed_ids() == {"c"} and st2.answered_ids() == {"a", "b"}
    st2.close()
    assert [r["request_id"] for r in iter_rows(p)] == ["a", "b", "c", "b"]


def test_append_validates_row(tmp_path):
    with ResponseStore(tmp_path / "x.jsonl") as st:
        with pytest.raises(ValueError, match="request_id"):
            st.append({"ok": True})


def test_torn_tail_ignored_then_cut(tmp_path):
    p = tmp_path / "r.jsonl"
    write(p, [row("a", True), row("b", True)])
    with open(p, "ab") as fh:
        fh.write(b'{"request_id": "c", "ok": tr')  # crash mid-write
    assert [r["request_id"] for r in iter_rows(p)] == ["a", "b"]
    with ResponseStore(p) as st:
        st.append(row("c", True))
    lines = p.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["request_id"] == "c"


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(row("a", True)) + "\nnot json\n" + json.dumps(row("b", True)) + "\n")
    with pytest.raises(ValueError, match=r"r\.jsonl:2: unreadable response row"):
        list(iter_rows(p))
    p.write_text(json.dumps({"ok": True}) + "\n")
    with pytest.raises(ValueError, match=r"r\.jsonl:1: .*'request_id'"):
        list(iter_rows(p))


def test_single_file_is_locked_against_a_second_writer(tmp_path):
    p = tmp_path / "r.jsonl"
    a = ResponseStore(p, batch_rows=1)
    a.append(row("a", True))
    b = ResponseStore(p, batch_rows=1)
    with pytest.raises(LockHeldError, match="in use by process"):
        b.append(row("b", True))
    assert (tmp_path / "r.jsonl.lock").exists()
    a.close()
    assert not (tmp_path / "r.jsonl.lock").exists()  # released and removed
    b.append(row("b", True))
    b.close()


def test_sharded_directory_store(tmp_path):
    d = tmp_path / "store"
    s1 = ResponseStore(str(d) + "/", batch_rows=1)
    s2 = ResponseStore(str(d) + "/", batch_rows=1)  # concurrent writer: its own part file
    s1.append(row("a", False))
    s2.append(row("a", True))
    s2.append(row("b", True))
    s1.close(), s2.close()
    assert len(list(d.glob("part-*.jsonl"))) == 2
    st = ResponseStore(d)
    assert st.answered_ids() == {"a", "b"} and st.failed_ids() == set()
    assert scan_ids(d) == ({"a", "b"}, set())


def test_merge_answered_never_replaced_in_any_order(tmp_path):
    """The reference's last-row-wins lets a later failure replace a success (§13.5); not here."""
    f1 = tmp_path / "1.jsonl"
    f2 = tmp_path / "2.jsonl"
    f3 = tmp_path / "3.jsonl"
    write(f1, [row("x", True, started="2026-01-01T00:00:01.000Z", response_text="first"), row("y", False)])
    write(f2, [row("x", False, started="2026-01-03T00:00:00.000Z"), row("z", False, started="2026-01-01T00:00:00.000Z")])
    write(f3, [row("x", True, started="2026-01-02T00:00:00.000Z", response_text="second"), row("y", True),
               row("z", False, started="2026-01-05T00:00:00.000Z", error="latest reason")])
    results = [merge(*perm) for perm in itertools.permutations([f1, f2, f3])]
    assert all(r == results[0] for r in results)
    m = results[0]
    assert m["x"]["ok"] and m["x"]["response_text"] == "first"  # earliest answer kept
    assert m["y"]["ok"]
    assert not m["z"]["ok"] and m["z"]["error"] == "latest reason"  # freshest failure reason


def test_merge_order_independent_under_shuffles(tmp_path):
    rng = random.Random(0)
    rows = []
    for i in range(40):
        for j in range(rng.randint(1, 4)):
            rows.append(row(f"id{i}", rng.random() < 0.5, started=f"2026-01-0{rng.randint(1, 3)}T00:00:00.000Z",
                            attempts=j + 1))
    ref = None
    for trial in range(6):
        rng.shuffle(rows)
        k = rng.randint(1, len(rows) - 1)
        a, b = tmp_path / f"a{trial}.jsonl", tmp_path / f"b{trial}.jsonl"
        write(a, rows[:k])
        write(b, rows[k:])
        m = merge(b, a) if trial % 2 else merge(a, b)
        ref = ref or m
        assert m == ref
        # the compact merge picks the same winners (kept as raw lines)
        lines = merge_lines(b, a) if trial % 2 else merge_lines(a, b)
        assert {rid: json.loads(line) for rid, line in lines.items()} == ref
    for rid, r in ref.items():
        if any(x["ok"] for x in rows if x["request_id"] == rid):
            assert r["ok"]
