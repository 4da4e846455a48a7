"""Benchmark (not a test): the heuristic extractor's units on real captions, and what annotators see.

``extract``: runs ``capaudit-heuristic-extractor`` (a heuristic baseline) on the 64-word claims
window of the first ``--n`` captions of IIW-400 (field ``IIW``) and all of DOCCI_Test (``DOCCI``)
from ``$CAPAUDIT_DATA_DIR/imageinwords``, writes the units per caption as JSONL (``--out``) and
prints the §4.4 counts (raw and deduplicated CBUs, per type). Run it before and after an extractor
change and ``--compare`` two outputs: per-caption unit counts must match when only the words of
units changed.

``judged``: the claims of judges' ``judged_claims.jsonl`` files, distinct by (unit, span): how many
shown claims are neither faithful to their span nor a whole-word substring of the caption window,
with the old display (the bare unit, plus ``(about: target)``) and with
:func:`capaudit.human.claim_display.shown_claim`; ``--study DB`` counts a study's items the same way
(opened read-only); ``--reextract`` also re-runs the current extractor on the claims' caption
windows and counts its units the same way.

    PYTHONPATH=lib python benchmarks/bench_claim_spans.py extract --out /tmp/v7.jsonl
    PYTHONPATH=lib python benchmarks/bench_claim_spans.py extract --out /tmp/v7.jsonl --compare /tmp/v6.jsonl
    PYTHONPATH=lib python benchmarks/bench_claim_spans.py judged outputs/demo/artifacts/judges/*/judged_claims.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lib"))


def sample_windows(n_iiw: int) -> List[Tuple[str, str]]:
    """(caption id, 64-word window) of the real caption sample."""
    from capaudit.claims.requests import caption_window

    root = Path(os.environ.get("CAPAUDIT_DATA_DIR", "data")) / "imageinwords"
    out: List[Tuple[str, str]] = []
    for name, field, limit in (("IIW-400", "IIW", n_iiw), ("DOCCI_Test", "DOCCI", None)):
        with open(root / name / "data.jsonl", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if limit is not None and i >= limit:
                    break
                cap = json.loads(line).get(field)
                if isinstance(cap, str) and cap.strip():
                    out.append((f"{name}:{i}", caption_window(cap, 64)))
    return out


def counts(rows: Sequence[Dict[str, Any]]) -> Counter:
    from capaudit.claims.summarize import caption_counter, unit_records

    total: Counter = Counter()
    for r in rows:
        total.update(caption_counter(unit_records({"claimed_units": r["units"]}), r["window"]))
    return total


def cmd_extract(args: argparse.Namespace) -> int:
    from capaudit.standins.claims_extractor import EXTRACTOR_VERSION, HeuristicExtractor

    windows = sample_windows(args.n)
    units = HeuristicExtractor().extract_many([w for _, w in windows])
    rows = [{"id": i, "window": w, "units": u} for (i, w), u in zip(windows, units)]
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    c = counts(rows)
    print(f"{EXTRACTOR_VERSION} (heuristic baseline): {len(rows)} captions, claimed_total {c['claimed_total']}, "
          f"claimed_dedup_total {c['claimed_dedup_total']}, duplicate_units {c['duplicate_units']}")
    print("  per type (dedup): " + ", ".join(f"{k[len('claimed_dedup_'):]} {v}" for k, v in sorted(c.items())
                                            if k.startswith("claimed_dedup_") and k != "claimed_dedup_total"))
    if args.compare:
        old = [json.loads(line) for line in Path(args.compare).read_text(encoding="utf-8").splitlines()]
        if [r["id"] for r in old] != [r["id"] for r in rows]:
            print("compare: the two files hold different captions", file=sys.stderr)
            return 1
        co = counts(old)
        differ = [r["id"] for r, o in zip(rows, old) if len(r["units"]) != len(o["units"])
                  or [u["category"] for u in r["units"]] != [u["category"] for u in o["units"]]]
        changed = sum(u != v for r, o in zip(rows, old) for u, v in zip(r["units"], o["units"]))
        spans = sum(u["span"] != v["span"] for r, o in zip(rows, old) for u, v in zip(r["units"], o["units"]))
        print(f"compare with {args.compare}: claimed_total {co['claimed_total']} -> {c['claimed_total']}, "
              f"claimed_dedup_total {co['claimed_dedup_total']} -> {c['claimed_dedup_total']}; captions whose "
              f"unit count or type sequence differs: {len(differ)}; units whose words changed: {changed}; "
              f"spans changed: {spans}")
        return 1 if differ else 0
    return 0


def _old_display(unit: str, target: str) -> str:
    """The display before issue 21 (``protocol.claim_text``): the unit, plus its target where absent."""
    unit, target = unit.strip(), target.strip()
    if target and target.lower() not in unit.lower() and target.lower() != "scene":
        return f"{unit} (about: {target})"
    return unit


def _unfaithful(claims: Sequence[Tuple[str, str, str, str, str]], display) -> int:
    from capaudit.human.claim_display import is_faithful

    bad = 0
    for unit, span, target, cat, window in claims:
        shown = display(unit, span, target, cat)
        if not (is_faithful(shown, span) or _in_words(shown, window)):
            bad += 1
    return bad


def _in_words(part: str, text: str) -> bool:
    """``part`` occurs in ``text`` on word boundaries ("pant" is not in "pants")."""
    import re

    return re.search(r"(?<![^\W_])" + re.escape(part) + r"(?![^\W_])", text) is not None


def _fallbacks(claims: Sequence[Tuple[str, str, str, str, str]]) -> int:
    """Claims whose unit is not faithful to its span, so the span is shown."""
    from capaudit.human.claim_display import is_faithful

    return sum(not is_faithful(u, s) for u, s, _, _, _ in claims)


def cmd_judged(args: argparse.Namespace) -> int:
    from capaudit.human.claim_display import shown_claim

    seen: Dict[Tuple[str, str], Tuple[str, str, str, str, str]] = {}
    windows: Dict[str, str] = {}
    for p in args.paths:
        for line in Path(p).read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            seen.setdefault((r["unit"], r["span"]), (r["unit"], r["span"], r["target"], r["category"],
                                                    r["caption_window"]))
            windows.setdefault(r["caption_id"], r["caption_window"])
    claims = list(seen.values())
    old = _unfaithful(claims, lambda u, s, t, c: _old_display(u, t))
    new = _unfaithful(claims, shown_claim)
    print(f"{len(claims)} distinct (unit, span) claims in {len(args.paths)} file(s), {len(windows)} caption windows")
    print(f"  not faithful to their span: old display {old} ({100.0 * old / len(claims):.1f} %), "
          f"shown_claim {new}; shown as the span (fallback): {_fallbacks(claims)}")
    if args.study:
        import sqlite3

        con = sqlite3.connect(f"file:{Path(args.study).resolve()}?mode=ro", uri=True)
        items = list(con.execute("SELECT unit, span, target, category, caption_window FROM items"))
        con.close()
        old, new = (_unfaithful(items, lambda u, s, t, c: _old_display(u, t)), _unfaithful(items, shown_claim))
        print(f"  study items ({args.study}): {len(items)}; not faithful: old display {old} "
              f"({100.0 * old / max(len(items), 1):.1f} %), shown_claim {new}; shown as the span: {_fallbacks(items)}")
    if args.reextract:
        from capaudit.standins.claims_extractor import EXTRACTOR_VERSION, HeuristicExtractor

        ids = sorted(windows)
        units = HeuristicExtractor().extract_many([windows[i] for i in ids])
        fresh = {(u["unit"], u["span"]): (u["unit"], u["span"], u["target"], u["category"], windows[i])
                 for i, us in zip(ids, units) for u in us}
        fc = list(fresh.values())
        print(f"  re-extracted with {EXTRACTOR_VERSION} (heuristic baseline): {len(fc)} distinct claims; "
              f"not faithful: bare unit {_unfaithful(fc, lambda u, s, t, c: _old_display(u, t))}, "
              f"shown_claim {_unfaithful(fc, shown_claim)}; shown as the span: {_fallbacks(fc)}")
    return 0


def main(argv: Sequence[str] = ()) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("--n", type=int, default=400, help="IIW-400 captions (default all 400)")
    e.add_argument("--out", required=True)
    e.add_argument("--compare", default=None, help="an earlier --out to compare with")
    j = sub.add_parser("judged")
    j.add_argument("paths", nargs="+")
    j.add_argument("--reextract", action="store_true")
    j.add_argument("--study", default=None, help="a study's SQLite store: count its items too (read-only)")
    args = ap.parse_args(list(argv) or None)
    return cmd_extract(args) if args.cmd == "extract" else cmd_judged(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
