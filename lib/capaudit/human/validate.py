"""Pre-launch validation of a study (``capaudit human validate``).

Four groups of checks, each problem class counted with its first examples:

* **images** — the file each item's image step would show (:meth:`Study.image_file`: the
  materialised copy, else the source path) exists and decodes through the notebook's own
  :func:`~.render.load_image`; every image is materialised into the study folder and its file still
  has the recorded SHA-256.
* **claims** — the judged-claims files the study was sampled from are still there and unchanged;
  every item's stored claim (unit, span, target, category, caption window, span offsets) equals its
  source row (the latest row of its question id); the claim the notebook shows
  (:meth:`Study.item_view`) equals :func:`~.claim_display.shown_claim` of the source row and comes
  back unchanged from the notebook's HTML (:func:`~.render.claim_html`); the caption window comes
  back whole, with exactly the span offsets' text marked (:func:`~.render.highlight_caption`); a
  shown claim with a span is faithful to it (:func:`~.claim_display.is_faithful`), one without is the
  unit itself.
* **assignments** — annotators exist; every base item has ``labels_per_item`` distinct active
  annotators, every hidden repeat exactly one who holds its original; every assigned item has all
  three phases; positions run 0..n-1 per annotator and phase; no annotator is over their cap, has an
  empty batch, or holds one claim twice.
* **design** — item counts per stratum, repeats, overlap items, sampling columns and the number of
  annotators agree with the sample report and the frozen config.

The report (``<study folder>/validation.json``) carries the study's design digest
(:func:`design_digest`), which the launch seal compares.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.io.manifest import sha256_of

from .claim_display import is_faithful, shown_claim
from .materialize import asset_intact
from .protocol import PHASES
from .render import claim_html, highlight_caption, html_text, load_image, shown_claim_text
from .sampling import Claim, base_stratum, read_judged_claims
from .store import utcnow
from .study import Study

VALIDATION_JSON = "validation.json"
MAX_EXAMPLES = 5
#: problem classes in report order
CLASSES = (
    "images_missing", "images_undecodable", "images_not_materialised", "assets_changed",
    "claims_source_missing", "claims_source_changed", "claims_source_unreadable", "claims_not_in_source",
    "claims_differ_from_source", "claims_shown_differently", "claims_rendering", "claims_unfaithful",
    "no_annotators", "labels_incomplete", "repeats_unassigned", "phases_incomplete", "positions_broken",
    "over_cap", "empty_batches", "duplicate_claims", "design_counts",
)


@dataclass
class ValidationReport:
    """Problems by class (count and first examples) and what was checked."""

    study_id: str
    design_sha256: str
    checked: Dict[str, int] = field(default_factory=dict)
    problems: Dict[str, List[str]] = field(default_factory=lambda: defaultdict(list))
    validated_at: str = field(default_factory=utcnow)

    def add(self, cls: str, example: str) -> None:
        self.problems[cls].append(example)

    @property
    def ok(self) -> bool:
        return not any(self.problems.values())

    def lines(self) -> List[str]:
        """One line per problem class: count and first examples."""
        out = []
        for cls in CLASSES:
            ex = self.problems.get(cls) or []
            if ex:
                shown = "; ".join(ex[:MAX_EXAMPLES]) + ("; ..." if len(ex) > MAX_EXAMPLES else "")
                out.append(f"{cls}: {len(ex)} (first: {shown})")
        return out

    def summary(self) -> str:
        c = self.checked
        return (f"study {self.study_id!r} valid: {c.get('items', 0)} items, {c.get('images', 0)} images, "
                f"{c.get('annotators', 0)} annotators, {c.get('assignments', 0)} assignments checked; design "
                f"sha256 {self.design_sha256[:12]}")

    def to_dict(self) -> Dict[str, Any]:
        return {
            "study_id": self.study_id, "validated_at": self.validated_at, "ok": self.ok,
            "design_sha256": self.design_sha256, "checked": dict(self.checked),
            "problems": {cls: {"count": len(self.problems[cls]), "examples": self.problems[cls][:MAX_EXAMPLES]}
                         for cls in CLASSES if self.problems.get(cls)},
        }


def design_digest(study: Study) -> str:
    """SHA-256 of the study's design: frozen config, item seal digest, assets, annotator roster and
    caps, and every assignment."""
    h = hashlib.sha256()
    row = study.store.one("SELECT config_json, seal_digest FROM studies")

    def put(obj: Any) -> None:
        h.update(json.dumps(obj, sort_keys=True, default=str).encode("utf-8") + b"\n")

    put([row["config_json"], row["seal_digest"]])
    put([[r["image_key"], r["file"], r["sha256"]] for r in study.store.read(
        "SELECT image_key, file, sha256 FROM assets ORDER BY image_key")])
    put([list(r) for r in study.store.read(
        "SELECT pseudonym, kind, role, target_items FROM participants ORDER BY pseudonym")])
    put([list(r) for r in study.store.read(
        "SELECT p.pseudonym, a.item_id, a.phase, a.position FROM assignments a JOIN participants p "
        "USING (participant_id) ORDER BY p.pseudonym, a.phase, a.position")])
    return h.hexdigest()


def _short(item_id: str) -> str:
    return item_id[:10]


def _check_images(study: Study, items: List[Any], rep: ValidationReport) -> None:
    assets = study.assets()
    seen = set()
    for it in items:
        key = it["image_key"]
        if key in seen:
            continue
        seen.add(key)
        path = study.image_file(it, assets)
        if not path or not Path(path).is_file():
            rep.add("images_missing", f"item {_short(it['item_id'])}: {path or '<no image path>'}")
            continue
        if key in assets and not asset_intact(study.folder, assets[key]):
            rep.add("assets_changed", f"item {_short(it['item_id'])}: {path}")
        elif key not in assets:
            rep.add("images_not_materialised", f"item {_short(it['item_id'])}: {path}")
        if load_image(path) is None:
            rep.add("images_undecodable", f"item {_short(it['item_id'])}: {path}")
    rep.checked["images"] = len(seen)


def _source_claims(study: Study, rep: ValidationReport) -> Optional[Dict[str, Claim]]:
    sources = study.sample_report().get("sources") or []
    if not sources:
        rep.add("claims_source_missing", "the study records no judged-claims source")
        return None
    paths = []
    for s in sources:
        p = Path(s["path"])
        if not p.is_file():
            rep.add("claims_source_missing", str(p))
            continue
        if sha256_of(p) != s.get("sha256"):
            rep.add("claims_source_changed", f"{p} (sha256 differs from the one recorded at sampling)")
        paths.append(p)
    if len(paths) != len(sources):
        return None
    try:
        claims, _ = read_judged_claims(paths)
    except InputError as exc:
        rep.add("claims_source_unreadable", str(exc))
        return None
    return {c.question_id: c for c in claims}


def _check_claims(study: Study, items: List[Any], rep: ValidationReport) -> None:
    source = _source_claims(study, rep)
    for it in items:
        iid = _short(it["item_id"])
        offsets = (it["span_start"], it["span_end"]) if it["span_start"] is not None else None
        if source is not None:
            c = source.get(it["question_id"])
            if c is None:
                rep.add("claims_not_in_source", f"item {iid}: question {it['question_id']}")
            else:
                stored = (it["unit"], it["span"], it["target"], it["category"], it["caption_window"], offsets)
                if stored != (c.unit, c.span, c.target, c.category, c.caption_window, c.span_offsets):
                    names = ("unit", "span", "target", "category", "caption_window", "span_offsets")
                    diff = [n for n, a, b in zip(names, stored, (c.unit, c.span, c.target, c.category,
                                                                 c.caption_window, c.span_offsets)) if a != b]
                    rep.add("claims_differ_from_source", f"item {iid}: {', '.join(diff)}")
                want = shown_claim(c.unit, c.span, c.target, c.category)
                for phase in ("caption", "image"):
                    got = study.item_view(it["item_id"], phase).claim
                    if got != want:
                        rep.add("claims_shown_differently", f"item {iid} ({phase} step): {got!r} != {want!r}")
                        break
        claim = study.item_view(it["item_id"], "caption").claim
        if shown_claim_text(claim_html(claim)) != claim:
            rep.add("claims_rendering", f"item {iid}: claim {claim!r} does not come back from its HTML")
        window = it["caption_window"]
        marked = highlight_caption(window, offsets)
        if html_text(marked) != window or (
                offsets and html_text(marked, "mark", "capaudit-claim") != window[offsets[0]:offsets[1]]):
            rep.add("claims_rendering", f"item {iid}: the caption window or its marked span does not come back")
        span = (it["span"] or "").strip()
        if span and not is_faithful(claim, span):
            rep.add("claims_unfaithful", f"item {iid}: {claim!r} for span {span!r}")
        elif not span and claim.split(" (about: ")[0] != (it["unit"] or "").strip():
            rep.add("claims_unfaithful", f"item {iid}: {claim!r} is not the unit {it['unit']!r}")


def _check_assignments(study: Study, items: List[Any], rep: ValidationReport) -> None:
    cfg = study.config
    people = study.store.read("SELECT participant_id, pseudonym, target_items FROM participants "
                              "WHERE role = 'annotator' AND status <> 'withdrawn' ORDER BY pseudonym")
    rep.checked["annotators"] = len(people)
    if not people:
        rep.add("no_annotators", "invite annotators (`capaudit human invite`) and assign (`capaudit human assign`)")
    active = {p["participant_id"]: p for p in people}
    rows = study.store.read("SELECT participant_id, item_id, phase, position FROM assignments")
    rep.checked["assignments"] = len(rows)
    by_item: Dict[str, set] = defaultdict(set)
    phases: Dict[tuple, set] = defaultdict(set)
    positions: Dict[tuple, List[int]] = defaultdict(list)
    for r in rows:
        phases[(r["participant_id"], r["item_id"])].add(r["phase"])
        positions[(r["participant_id"], r["phase"])].append(r["position"])
        if r["phase"] == PHASES[0] and r["participant_id"] in active:
            by_item[r["item_id"]].add(r["participant_id"])
    info = {it["item_id"]: it for it in items}
    for it in items:
        holders = by_item.get(it["item_id"], set())
        if it["repeat_of"] is None:
            if len(holders) != cfg.labels_per_item:
                rep.add("labels_incomplete", f"item {_short(it['item_id'])}: {len(holders)} of "
                                             f"{cfg.labels_per_item} annotators")
        elif len(holders) != 1 or not holders <= by_item.get(it["repeat_of"], set()):
            rep.add("repeats_unassigned", f"repeat {_short(it['item_id'])}: {len(holders)} holders "
                                          "(needs one who holds its original)")
    for (pid, iid), got in sorted(phases.items()):
        if got != set(PHASES):
            name = active[pid]["pseudonym"] if pid in active else pid[:8]
            rep.add("phases_incomplete", f"{name} item {_short(iid)}: {sorted(got)}")
    for (pid, phase), pos in sorted(positions.items()):
        if sorted(pos) != list(range(len(pos))):
            name = active[pid]["pseudonym"] if pid in active else pid[:8]
            rep.add("positions_broken", f"{name} {phase}: positions {sorted(pos)[:6]}")
    load: Counter = Counter()
    claims: Dict[str, Counter] = defaultdict(Counter)
    for (pid, iid) in phases:
        it = info.get(iid)
        if it is None:
            continue
        if it["repeat_of"] is None:
            load[pid] += 1
            claims[pid][it["question_id"]] += 1
    for pid, p in active.items():
        if not any(k[0] == pid for k in phases):
            rep.add("empty_batches", f"{p['pseudonym']} has no items")
        if load[pid] > p["target_items"]:
            rep.add("over_cap", f"{p['pseudonym']}: {load[pid]} items, cap {p['target_items']}")
        dup = [q for q, n in claims[pid].items() if n > 1]
        if dup:
            rep.add("duplicate_claims", f"{p['pseudonym']}: {len(dup)} claims twice (first {dup[0]})")


def _check_design(study: Study, items: List[Any], rep: ValidationReport) -> None:
    cfg = study.config
    sr = study.sample_report()
    base = [it for it in items if it["repeat_of"] is None]
    repeats = len(items) - len(base)
    if sr.get("n_base") != len(base):
        rep.add("design_counts", f"{len(base)} base items, the sample report has {sr.get('n_base')}")
    if sr.get("n_repeats") != repeats:
        rep.add("design_counts", f"{repeats} hidden repeats, the sample report has {sr.get('n_repeats')}")
    per = Counter(base_stratum(it["stratum"]) for it in base)
    for stratum, n in sorted((sr.get("samples") or {}).items()):
        if per.get(stratum, 0) != n:
            rep.add("design_counts", f"stratum {stratum}: {per.get(stratum, 0)} items, the sample report has {n}")
    for stratum, n in sorted(per.items()):
        if n > cfg.claims_per_stratum:
            rep.add("design_counts", f"stratum {stratum}: {n} items > claims_per_stratum {cfg.claims_per_stratum}")
        n_overlap = sum(1 for it in base if base_stratum(it["stratum"]) == stratum and it["overlap"])
        if n_overlap != min(cfg.overlap_per_stratum, n):
            rep.add("design_counts", f"stratum {stratum}: {n_overlap} overlap items, design "
                                     f"{min(cfg.overlap_per_stratum, n)}")
    twice = [q for q, n in Counter(it["question_id"] for it in base).items() if n > 1]
    for q in twice:
        rep.add("duplicate_claims", f"question {q} is sampled as {Counter(it['question_id'] for it in base)[q]} items")
    sub = Counter(it["stratum"] for it in base)
    for it in base:
        if it["sample_size"] != sub[it["stratum"]] or it["population_size"] < it["sample_size"]:
            rep.add("design_counts", f"item {_short(it['item_id'])}: sample_size {it['sample_size']} / population "
                                     f"{it['population_size']}, {sub[it['stratum']]} items in {it['stratum']}")
    if cfg.require_all_strata and sr.get("missing_strata"):
        rep.add("design_counts", f"missing strata: {', '.join(sr['missing_strata'])}")
    n_ann = rep.checked.get("annotators", 0)
    if n_ann and n_ann != cfg.participants:
        rep.add("design_counts", f"{n_ann} annotators, the design has {cfg.participants} participants")


def validate_study(study: Study) -> ValidationReport:
    """Every check of the module docstring on ``study`` (nothing is written)."""
    items = study.items()
    if not items:
        raise EmptyInputError("the study has no items yet: run `capaudit human sample` first", path=study.path)
    rep = ValidationReport(study.study_id, design_digest(study))
    rep.checked["items"] = len(items)
    _check_images(study, items, rep)
    _check_claims(study, items, rep)
    _check_assignments(study, items, rep)
    _check_design(study, items, rep)
    return rep


def write_report(study: Study, rep: ValidationReport) -> Path:
    """``<study folder>/validation.json``."""
    return write_json_atomic(study.folder / VALIDATION_JSON, rep.to_dict(), indent=2)


__all__ = ["CLASSES", "VALIDATION_JSON", "ValidationReport", "design_digest", "validate_study", "write_report"]
