"""Supported CBU per caption corrected by people: prediction-powered inference on the study's sample.

The judges stage reports, per (judge, surface), ``supported_cap`` = the judge's "yes" answers over
the captions it answered (:mod:`capaudit.judges.cells`). The study's human labels correct that
figure for the judge's bias, per judge and surface (and per surface group holding several surfaces):

* **Population** (census) of a surface: the study's sampling pool — every claim of that surface in
  the judged-claims files the study was sampled from that the sampler could have drawn (eight claim
  types, per-caption duplicates dropped, answered by every study judge, surface in a group;
  :func:`capaudit.human.sampling.build_pool`). The files are re-read and must be the very files the
  study recorded (SHA-256) with the recorded stratum pool sizes, so the census and the sampling
  weights describe the same claims. ``f = 1`` where the judge answered "yes", else 0 ("no" and
  "uncertain" alike, as ``supported_cap`` counts only "yes").
* **Labelled**: the study's sampled items of the surface (hidden repeats, weight 0, excluded) whose
  image-support consensus (:func:`capaudit.human.consensus.consensus_rows`) is substantive: ``y = 1``
  for "yes" (the image supports the claim), 0 for "no". Consensus "uncertain", "not_visual",
  "image_unavailable", "prefer_not_to_answer", no consensus, and items without image labels are
  *not* zeros: they are left out and counted per row (``excluded``). Their recorded sampling
  weights leave with them, so the Hájek normalisation spreads their weight over the surface's
  substantive items: the estimate treats their support as missing at random within the surface.
  ``weights`` = the recorded ``sampling_weight`` (pool size / sample size of the item's design
  stratum = 1 / inclusion probability), ``strata`` = the design strata recorded per item: the
  sampling strata ``<surface group>/<claim type>``, or under ``sampling: disagreement_first`` their
  judge-disagreement sub-strata ``<surface group>/<claim type>/{disagree,agree}``
  (:mod:`capaudit.human.sampling`), whose rebuilt sub-pool sizes must match the recorded design too.
* **θ** = the share of the surface's claims people find supported:
  :func:`capaudit.stats.calibration.weighted_ppi_mean` (Hájek-weighted PPI++, tuned λ, stratified
  delete-one jackknife se re-estimating λ, t interval), beside the human-only weighted estimate
  (same function, λ = 0, stratified sandwich se) and the
  judge-only share ``mean(f)`` (no sampling error; its error is the bias the people measure).
  A stratum with fewer than two substantive items cannot carry a variance: such strata are pooled
  into one, and where that pool still holds a single item it joins the smallest other stratum
  (``strata_collapsed`` counts the design strata merged; ``strata`` those used).
* **Supported CBU per caption** = ``θ × claims / captions`` with ``claims`` = the census size and
  ``captions`` = the distinct captions of the surface with at least one row in the judged-claims
  files — the judges stage's ``responses`` (captions with a non-empty question list answered by every
  judge of the slice; every such caption has judged-claims rows). Interval bounds and se are scaled by
  the same known constant. ``judge_cap`` = ``yes / captions`` over the census (the judge-only
  estimate on the same population); ``judge_cap_all_rows`` = ``yes`` over every row of the surface
  (duplicates and claims outside the pool included) ``/ captions`` — the judges stage's own
  ``supported_cap`` for the same captions.

Never a number from missing data: a (judge, surface) with fewer than two substantive labels gets
``status = "too_few_labels"`` and no estimate, a judge without answers on the surface's claims
``status = "no_judge_answers"``; such rows are kept (with their counts) and marked.
Estimates are not clipped to [0, 1].

Variance caveat: a surface row uses only that surface's labelled items. Where a surface group has
several surfaces, a stratum (``<group>/<type>``) spans them and the surface is a domain of it; the
textbook domain estimator would add the stratum's other sampled items with ``z = 0``, which widens
the interval slightly. Each surface is its own group in our configurations, so rows there are exact.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import InputError
from capaudit.stats.calibration import Interval, weighted_ppi_mean

from .consensus import consensus_rows
from .sampling import Claim, build_pool, file_digest, read_judged_claims, substratum_pools
from .study import Study

PathLike = Union[str, Path]
SUBSTANTIVE = ("yes", "no")
#: the pseudo-stratum of strata with fewer than two substantive items
POOLED_STRATUM = "__pooled__"
#: statuses of a row
STATUS_OK, STATUS_FEW, STATUS_NO_JUDGE = "ok", "too_few_labels", "no_judge_answers"
CORRECTED_JSON = "human_corrected_support.json"
DEFINITION = (
    "theta = weighted PPI++ (Hajek, tuned lambda) share of the surface's sampling-pool claims whose human "
    "image-support consensus is 'yes' (consensus yes/no only; other consensus values and unlabelled items "
    "left out and counted); f = 1 if the judge answered yes; corrected supported CBU per caption = "
    "theta * claims / captions, captions = distinct captions of the surface with at least one judged-claims "
    "row (the judges stage's responses, denominator of supported_cap)"
)


@dataclass(frozen=True)
class Estimate:
    """A share (θ) and the supported CBU per caption it implies (``cap_* = share_* × claims / captions``)."""

    share: float
    share_lo: float
    share_hi: float
    share_se: float
    cap: float
    cap_lo: float
    cap_hi: float
    cap_se: float
    lam: Optional[float]

    @classmethod
    def of(cls, iv: Interval, scale: float) -> "Estimate":
        return cls(iv.estimate, iv.lo, iv.hi, iv.se, iv.estimate * scale, iv.lo * scale, iv.hi * scale,
                   iv.se * scale, iv.lam)


@dataclass(frozen=True)
class CorrectedRow:
    """One (judge, surface) or (judge, surface group) row (module docstring)."""

    judge: str
    scope: str  # "surface" or "surface_group"
    surface_group: str
    surface: str  # the surface, or "all" for a surface-group row
    status: str
    claims: int
    captions: int
    judge_yes: int
    judge_share: Optional[float]
    judge_cap: Optional[float]
    judge_cap_all_rows: Optional[float]
    sampled: int
    labelled: int
    labelled_yes: int
    excluded: Dict[str, int]
    strata: int
    strata_collapsed: int
    ppi: Optional[Estimate]
    human_only: Optional[Estimate]
    level: float
    labels: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def flat(self) -> Dict[str, Any]:
        """One CSV row: estimates as ``ppi_*`` / ``human_*`` columns (empty when not estimated)."""
        d = {k: v for k, v in self.to_dict().items() if k not in ("ppi", "human_only", "excluded")}
        d["excluded"] = ";".join(f"{k}={v}" for k, v in sorted(self.excluded.items()))
        d["excluded_total"] = sum(self.excluded.values())
        for prefix, est in (("ppi", self.ppi), ("human", self.human_only)):
            for k in Estimate.__dataclass_fields__:
                d[f"{prefix}_{k}"] = getattr(est, k) if est is not None else None
        return d


@dataclass
class _Domain:
    """Census and labelled items of one surface or surface group."""

    surfaces: List[str]
    pool: List[Claim] = field(default_factory=list)
    captions: int = 0
    all_rows: List[Claim] = field(default_factory=list)
    items: List[Tuple[Mapping[str, Any], Optional[str]]] = field(default_factory=list)  # (item row, consensus)


def _design_strata(strata: Sequence[str]) -> Tuple[List[str], int]:
    """Strata usable by the sandwich variance and how many design strata were merged (module docstring).

    Strata with fewer than two items are pooled into one; where that pool holds a single item, it
    joins the smallest other stratum (fewest items, then name). Needs at least two items in all.
    """
    counts = Counter(strata)
    small = {h for h, c in counts.items() if c < 2}
    if not small:
        return list(strata), 0
    if sum(counts[h] for h in small) < 2:
        partner = min((h for h in counts if h not in small), key=lambda h: (counts[h], h))
        small.add(partner)
    return [POOLED_STRATUM if h in small else h for h in strata], len(small)


def _check_sources(study: Study, paths: Sequence[PathLike]) -> None:
    recorded = study.sample_report().get("sources") or []
    if not recorded:
        raise InputError("the study records no judged-claims sources (was it sampled?)", path=study.path)
    for p in paths:
        if not Path(p).is_file():
            raise InputError("judged-claims file the study was sampled from is not there", path=p)
    want = sorted(s["sha256"] for s in recorded)
    got = sorted(file_digest(p) for p in paths)
    if want != got:
        raise InputError("these judged-claims files are not the ones the study was sampled from (SHA-256 differs): "
                         f"recorded {[s['path'] for s in recorded]}", path=", ".join(str(p) for p in paths))


def _estimate(dom: _Domain, judge: str, level: float) -> Tuple[str, Dict[str, Any]]:
    f_all = [1.0 if c.answers.get(judge) == "yes" else 0.0 for c in dom.pool]
    answered = sum(judge in c.answers for c in dom.pool)
    out: Dict[str, Any] = {"judge_yes": int(sum(f_all))}
    if answered < len(dom.pool) or not dom.pool:
        return STATUS_NO_JUDGE, out
    scale = len(dom.pool) / dom.captions
    out["judge_share"] = sum(f_all) / len(f_all)
    out["judge_cap"] = sum(f_all) / dom.captions
    out["judge_cap_all_rows"] = sum(c.answers.get(judge) == "yes" for c in dom.all_rows) / dom.captions
    ys, fs, ws, hs = [], [], [], []
    excluded: Counter = Counter()
    for it, cons in dom.items:
        if cons not in SUBSTANTIVE:
            excluded["no_consensus" if cons is None else cons] += 1
            continue
        ys.append(1.0 if cons == "yes" else 0.0)
        fs.append(1.0 if json.loads(it["judge_answers"]).get(judge) == "yes" else 0.0)
        ws.append(float(it["weight"]))
        hs.append(str(it["stratum"]))
    out.update(sampled=len(dom.items), labelled=len(ys), labelled_yes=int(sum(ys)), excluded=dict(sorted(excluded.items())))
    if len(ys) < 2:
        return STATUS_FEW, out
    strata, collapsed = _design_strata(hs)
    ppi = weighted_ppi_mean(ys, fs, f_all, ws, strata=strata, level=level)
    human = weighted_ppi_mean(ys, fs, f_all, ws, strata=strata, level=level, lam=0.0)
    out.update(strata=len(set(strata)), strata_collapsed=collapsed, ppi=Estimate.of(ppi, scale),
               human_only=Estimate.of(human, scale))
    return STATUS_OK, out


def corrected_support(study: Study, judged_claims_paths: Optional[Sequence[PathLike]] = None,
                      level: float = 0.95, labels: str = "") -> List[CorrectedRow]:
    """Human-corrected supported CBU per caption, per judge × surface (× surface group); module docstring.

    ``judged_claims_paths`` default to the files the study recorded when it was sampled; given or
    not, they must match the recorded SHA-256 digests. ``labels`` names the annotators' kind in
    every row (e.g. "simulated annotators"). Rows: per judge, per surface group (sorted) the group's
    surfaces (sorted), preceded by a group row where the group holds two or more surfaces.
    """
    paths = [Path(p) for p in (judged_claims_paths if judged_claims_paths is not None else
                               [s["path"] for s in study.sample_report().get("sources") or []])]
    _check_sources(study, paths)
    claims, _ = read_judged_claims(paths)
    strata, _judges, _ = build_pool(claims, study.config)
    pools = study.sample_report().get("pools") or {}
    sizes = {h: len(v) for h, v in strata.items()}
    if pools and sizes != pools:
        raise InputError("the sampling pool rebuilt from the judged-claims files differs from the recorded one "
                         f"(recorded {pools}, rebuilt {sizes})", path=study.path)
    design = study.sample_report().get("design") or {"sampling": "reference"}
    if design.get("sampling") == "disagreement_first":
        recorded = {h: v["pool"] for h, v in (design.get("substrata") or {}).items()}
        rebuilt = substratum_pools(strata, study.judges)
        if rebuilt != recorded:
            raise InputError("the judge-disagreement sub-pools rebuilt from the judged-claims files differ from the "
                             f"recorded design (recorded {recorded}, rebuilt {rebuilt})", path=study.path)
    group_surfaces: Dict[str, set] = {}
    surface_dom: Dict[str, _Domain] = {}
    for h, pool in strata.items():
        g = h.split("/", 1)[0]
        for c in pool:
            group_surfaces.setdefault(g, set()).add(c.surface)
            surface_dom.setdefault(c.surface, _Domain([c.surface])).pool.append(c)
    captions: Dict[str, set] = {}
    for c in claims:
        captions.setdefault(c.surface, set()).add(c.caption_id)
        if c.surface in surface_dom:
            surface_dom[c.surface].all_rows.append(c)
    for s, dom in surface_dom.items():
        dom.captions = len(captions[s])
    cons = consensus_rows(study)
    for it in study.items():
        if it["repeat_of"] is not None or float(it["weight"]) <= 0:
            continue
        if it["surface"] not in surface_dom:
            raise InputError(f"study item {it['item_id']} (surface {it['surface']!r}) is not in the rebuilt pool",
                             path=study.path)
        surface_dom[it["surface"]].items.append((it, cons.get((it["item_id"], "image_support"))))
    domains: List[Tuple[str, str, str, _Domain]] = []
    for g in sorted(group_surfaces):
        members = sorted(group_surfaces[g])
        if len(members) > 1:
            gd = _Domain(members)
            for s in members:
                sd = surface_dom[s]
                gd.pool += sd.pool
                gd.all_rows += sd.all_rows
                gd.items += sd.items
                gd.captions += sd.captions
            domains.append(("surface_group", g, "all", gd))
        domains += [("surface", g, s, surface_dom[s]) for s in members]
    rows: List[CorrectedRow] = []
    for j in study.judges:
        for scope, g, s, dom in domains:
            status, v = _estimate(dom, j, level)
            rows.append(CorrectedRow(
                judge=j, scope=scope, surface_group=g, surface=s, status=status, claims=len(dom.pool),
                captions=dom.captions, judge_yes=v["judge_yes"], judge_share=v.get("judge_share"),
                judge_cap=v.get("judge_cap"), judge_cap_all_rows=v.get("judge_cap_all_rows"),
                sampled=v.get("sampled", len(dom.items)), labelled=v.get("labelled", 0),
                labelled_yes=v.get("labelled_yes", 0), excluded=v.get("excluded", {}), strata=v.get("strata", 0),
                strata_collapsed=v.get("strata_collapsed", 0), ppi=v.get("ppi"), human_only=v.get("human_only"),
                level=level, labels=labels))
    return rows


def corrected_payload(study: Study, rows: Sequence[CorrectedRow], simulated: bool) -> Dict[str, Any]:
    """The JSON export: definition, counts of rows without an estimate, and the rows."""
    return {
        "study_id": study.study_id, "simulated": simulated, "definition": DEFINITION,
        "level": rows[0].level if rows else None,
        "rows_without_estimate": dict(Counter(r.status for r in rows if r.status != STATUS_OK)),
        "rows": [r.to_dict() for r in rows],
    }


__all__ = ["CORRECTED_JSON", "CorrectedRow", "DEFINITION", "Estimate", "STATUS_FEW", "STATUS_NO_JUDGE", "STATUS_OK",
           "corrected_payload", "corrected_support"]
