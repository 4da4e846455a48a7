"""Inter-rater and judge–human agreement statistics (reference-spec §7).

Two-rater statistics over paired labels ``a[i]``, ``b[i]`` (one pair per item):

* exact agreement ``p_o = Σ [a = b] / n`` (optionally weighted: :func:`exact_agreement`);
* Cohen's κ ``(p_o − p_e) / (1 − p_e)`` with ``p_e = Σ_k p_a(k) p_b(k)`` from each rater's own
  marginals (scikit-learn's ``cohen_kappa_score``); undefined (``None``) when ``p_e = 1`` (both raters
  used one and the same label). It needs two *fixed* raters: :func:`fixed_rater_pairs` finds them in a
  study, where items are otherwise labelled by different participants;
* Fleiss' κ (:func:`fleiss_kappa`) for items labelled by any number of raters: ``P_o`` = mean over
  items of the share of agreeing rater pairs, ``p_e = Σ_k π_k²`` with ``π_k`` the mean per-item share
  of label ``k`` (Fleiss 1971 for a constant number of raters; Gwet 2014's form when it varies). With
  two raters per item it is Scott's π — the κ of the symmetrized pooled pairs (:func:`symmetrized_pairs`);
* Gwet's AC1 ``(p_o − p_e) / (1 − p_e)`` with ``p_e = Σ_k π_k (1 − π_k) / (q − 1)``,
  ``π_k = (p_a(k) + p_b(k)) / 2`` and ``q`` the size of the **label set** (not the number of labels
  seen), so AC1 always exists for ``q ≥ 2``;
* the same statistics over **count tables** (vectorised, for millions of items): ``table[i, k]`` = how
  many raters gave item ``i`` label ``k`` (:func:`rating_table` builds it from an ``(m, n)`` array of
  label codes): :func:`fleiss_kappa_table`, :func:`gwet_ac1_table` (Gwet 2008/2014 for ``m`` raters:
  ``p_a`` = mean over items of ``Σ_k r_ik (r_ik − 1) / (r_i (r_i − 1))``, ``p_e = Σ_k π_k (1 − π_k) /
  (q − 1)`` with ``π_k`` = mean over items of ``r_ik / r_i`` and ``q`` the number of table columns),
  :func:`krippendorff_alpha_table` (nominal α from the coincidence matrix, Krippendorff 2011: equal
  to ``krippendorff.alpha(..., level_of_measurement="nominal")``, tested) and, from a ``q × q``
  confusion matrix, :func:`cohen_kappa_table` (scikit-learn's ``cohen_kappa_score`` with ``labels``).
  Items rated fewer than twice are left out of the first three, which also take per-row
  ``weights`` (a table of the distinct rows and their multiplicities); undefined values are ``None``;
* binary agreement after explicit abstention accounting (:func:`binary_agreement`): every pair in
  which either rater abstained is dropped and counted; on the rest, with ``a`` = both positive,
  ``d`` = both negative and ``b``, ``c`` the two disagreement cells, positive agreement
  ``2a / (2a + b + c)`` and negative agreement ``2d / (2d + b + c)`` (``None`` when the denominator is 0);
* consensus (:func:`consensus`): the adjudicated value if there is one, else the value held by a strict
  majority of at least two raters (unanimous ``uncertain`` is kept), else none;
* judge–human agreement (:func:`judge_human_agreement`): sampling-weight–weighted nominal exact
  agreement between the human consensus and each judge's answer, with the image-cluster bootstrap of
  :func:`capaudit.stats.bootstrap.cluster_bootstrap` (10,000 resamples, seed 1477, percentile interval
  with linear interpolation), overall and per surface group.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .bootstrap import CLUSTER_RESAMPLES, CLUSTER_SEED, ClusterBootstrap, cluster_bootstrap, weighted_nominal_agreement

#: Nominal labels of the two-rater CLI contract (``capaudit human agreement``).
NOMINAL_LABELS: Tuple[str, ...] = ("yes", "no", "uncertain")
#: Binary labels (positive, negative).
BINARY_LABELS: Tuple[str, ...] = ("yes", "no")
#: Human image-support labels: the 6-label category set of the judge–human statistic (§7).
IMAGE_SUPPORT_LABELS: Tuple[str, ...] = (
    "yes", "no", "uncertain", "not_visual", "image_unavailable", "prefer_not_to_answer",
)
#: Labels that count as abstentions in binary agreement (§7: metrics + export).
ABSTENTIONS: Tuple[str, ...] = (
    "uncertain", "unjudgeable", "image_unavailable", "not_visual", "not_applicable",
    "prefer_not_to_answer", "cannot_judge",
)


def _check_pairs(a: Sequence[str], b: Sequence[str], labels: Optional[Sequence[str]], who: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{who}: {len(a)} labels for rater A but {len(b)} for rater B")
    if labels is not None:
        allowed = set(labels)
        for i, (x, y) in enumerate(zip(a, b)):
            for lab in (x, y):
                if lab not in allowed:
                    raise ValueError(f"{who}: pair {i}: label {lab!r} not in {list(labels)}")


def confusion_matrix(a: Sequence[str], b: Sequence[str], labels: Sequence[str]) -> List[List[int]]:
    """Counts ``m[i][j]`` of pairs with ``a = labels[i]`` and ``b = labels[j]``."""
    _check_pairs(a, b, labels, "confusion_matrix")
    pos = {lab: i for i, lab in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for x, y in zip(a, b):
        m[pos[x]][pos[y]] += 1
    return m


def exact_agreement(a: Sequence[str], b: Sequence[str], weights: Optional[Sequence[float]] = None) -> float:
    """Exact agreement ``Σ w·[a = b] / Σ w`` (unweighted: the share of equal pairs)."""
    if not a:
        raise ValueError("exact_agreement: no pairs")
    return weighted_nominal_agreement(a, b, weights)


def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Optional[Sequence[str]] = None) -> Optional[float]:
    """Cohen's κ from each rater's own marginals; ``None`` when chance agreement is 1."""
    _check_pairs(a, b, labels, "cohen_kappa")
    n = len(a)
    if n == 0:
        raise ValueError("cohen_kappa: no pairs")
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1.0 - pe)


def fleiss_kappa(ratings: Mapping[Hashable, Sequence[str]], labels: Optional[Sequence[str]] = None
                 ) -> Optional[float]:
    """Fleiss' κ over the items rated at least twice; ``None`` when chance agreement is 1.

    ``ratings`` maps an item to its labels (one per rater; raters need not be the same across
    items). ``P_o = mean_i Σ_k n_ik (n_ik − 1) / (m_i (m_i − 1))``, ``π_k = mean_i n_ik / m_i``,
    ``p_e = Σ_k π_k²``: Fleiss (1971) when every item has the same number of raters ``m``, and the
    varying-``m`` form of Gwet (2014, irrCAC ``fleiss.kappa.raw``) otherwise. Two raters per item:
    Scott's π. Items with fewer than two labels are left out.
    """
    items = [list(v) for v in ratings.values() if len(v) >= 2]
    if not items:
        raise ValueError("fleiss_kappa: no item has two or more labels")
    if labels is not None:
        allowed = set(labels)
        for labs in items:
            for lab in labs:
                if lab not in allowed:
                    raise ValueError(f"fleiss_kappa: label {lab!r} not in {list(labels)}")
    po = 0.0
    share: Counter = Counter()
    for labs in items:
        m = len(labs)
        counts = Counter(labs)
        po += sum(c * (c - 1) for c in counts.values()) / (m * (m - 1))
        for k, c in counts.items():
            share[k] += c / m
    n = len(items)
    po /= n
    pe = sum((v / n) ** 2 for v in share.values())
    if pe >= 1.0:
        return None
    return (po - pe) / (1.0 - pe)


def fixed_rater_pairs(ratings: Mapping[Hashable, Mapping[Hashable, str]]
                      ) -> Optional[Tuple[Tuple[Hashable, Hashable], List[str], List[str]]]:
    """``((rater_a, rater_b), labels_a, labels_b)`` when every item rated at least twice was rated by
    exactly the same two raters (sorted ids, items in order); else ``None``: Cohen's κ is defined for
    two fixed raters only."""
    items = [(i, r) for i, r in ratings.items() if len(r) >= 2]
    if not items:
        return None
    pair = tuple(sorted(items[0][1], key=str))
    if len(pair) != 2 or any(tuple(sorted(r, key=str)) != pair for _, r in items):
        return None
    ra, rb = pair
    return (ra, rb), [r[ra] for _, r in items], [r[rb] for _, r in items]


def gwet_ac1(a: Sequence[str], b: Sequence[str], labels: Sequence[str]) -> float:
    """Gwet's AC1 with ``q = len(labels)`` (the size of the label set, §7)."""
    _check_pairs(a, b, labels, "gwet_ac1")
    q = len(set(labels))
    if q < 2:
        raise ValueError("gwet_ac1: the label set needs at least two labels")
    n = len(a)
    if n == 0:
        raise ValueError("gwet_ac1: no pairs")
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = 0.0
    for k in set(labels):
        pi = (ca[k] + cb[k]) / (2.0 * n)
        pe += pi * (1.0 - pi)
    pe /= q - 1
    return (po - pe) / (1.0 - pe)


def rating_table(codes: "np.ndarray", q: int) -> "np.ndarray":
    """``(n, q)`` counts ``r_ik`` (how many of the ``m`` raters gave item ``i`` label ``k``) from an
    ``(m, n)`` array of label codes ``0..q-1`` (one row per rater, one column per item)."""
    c = np.asarray(codes)
    if c.ndim != 2:
        raise ValueError(f"rating_table: expected an (m, n) array of label codes, got shape {c.shape}")
    if c.size and (int(c.min()) < 0 or int(c.max()) >= q):
        raise ValueError(f"rating_table: label codes must lie in 0..{q - 1}")
    out = np.empty((c.shape[1], q), dtype=np.int64)
    for k in range(q):
        out[:, k] = np.count_nonzero(c == k, axis=0)
    return out


def _table(table: "np.ndarray", who: str, weights: Optional["np.ndarray"] = None
           ) -> Tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
    """The rows of a count table rated at least twice (with a positive weight), as float64, their
    rater counts and weights."""
    t = np.asarray(table)
    if t.ndim != 2 or t.shape[1] < 2:
        raise ValueError(f"{who}: expected an (n, q) count table with q >= 2, got shape {t.shape}")
    if t.size and t.min() < 0:
        raise ValueError(f"{who}: counts must be >= 0")
    t = t.astype(np.float64)
    if weights is None:
        w = np.ones(t.shape[0])
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (t.shape[0],) or (w.size and (w.min() < 0 or not np.isfinite(w).all())):
            raise ValueError(f"{who}: weights must be {t.shape[0]} finite numbers >= 0")
    r = t.sum(axis=1)
    keep = (r >= 2) & (w > 0)
    if not keep.any():
        raise ValueError(f"{who}: no item has two or more ratings")
    if not keep.all():
        t, r, w = t[keep], r[keep], w[keep]
    return t, r, w


def _pa_pi(t: "np.ndarray", r: "np.ndarray", w: "np.ndarray") -> Tuple[float, "np.ndarray"]:
    """Observed agreement (mean share of agreeing rater pairs) and the mean label shares π_k."""
    total = float(w.sum())
    pa = float((w * (t * (t - 1)).sum(axis=1) / (r * (r - 1))).sum()) / total
    pi = (w[:, None] * t / r[:, None]).sum(axis=0) / total
    return pa, pi


def fleiss_kappa_table(table: "np.ndarray", weights: Optional["np.ndarray"] = None) -> Optional[float]:
    """Fleiss' κ of a count table (:func:`fleiss_kappa`'s formula, vectorised); ``None`` when
    chance agreement is 1 (a single label used). ``weights[i]`` (default 1) counts row ``i`` as that
    many items (a table of distinct rows with their multiplicities gives the full table's value)."""
    t, r, w = _table(table, "fleiss_kappa_table", weights)
    pa, pi = _pa_pi(t, r, w)
    if np.count_nonzero(pi) <= 1:
        return None
    pe = float((pi * pi).sum())
    return (pa - pe) / (1.0 - pe)


def gwet_ac1_table(table: "np.ndarray", weights: Optional["np.ndarray"] = None) -> Optional[float]:
    """Gwet's AC1 for any number of raters over a count table with ``q`` = its number of columns
    (the size of the label set); with two raters per item it is :func:`gwet_ac1`. ``weights`` as
    for :func:`fleiss_kappa_table`."""
    t, r, w = _table(table, "gwet_ac1_table", weights)
    q = t.shape[1]
    pa, pi = _pa_pi(t, r, w)
    pe = float((pi * (1.0 - pi)).sum()) / (q - 1)
    if pe >= 1.0:  # pragma: no cover - p_e <= 1/q
        return None
    return (pa - pe) / (1.0 - pe)


def krippendorff_alpha_table(table: "np.ndarray", weights: Optional["np.ndarray"] = None) -> Optional[float]:
    """Krippendorff's nominal α of a count table (units = rows, values = columns): ``1 − (n − 1)
    (n − Σ_c o_cc) / (n² − Σ_c n_c²)`` with the coincidences ``o_cc = Σ_u r_uc (r_uc − 1) / (m_u − 1)``,
    ``n_c = Σ_u r_uc`` and ``n = Σ_c n_c`` over the pairable units (``m_u ≥ 2``) — the value of
    ``krippendorff.alpha(value_counts=table, level_of_measurement="nominal")``; ``None`` when the
    expected disagreement is 0 (a single value used). ``weights`` as for :func:`fleiss_kappa_table`."""
    t, r, w = _table(table, "krippendorff_alpha_table", weights)
    o_diag = float((w * (t * (t - 1)).sum(axis=1) / (r - 1)).sum())
    nc = (w[:, None] * t).sum(axis=0)
    n = float(nc.sum())
    de = n * n - float((nc * nc).sum())
    if de <= 0:
        return None
    return 1.0 - (n - 1.0) * (n - o_diag) / de


def cohen_kappa_table(confusion: "np.ndarray") -> Optional[float]:
    """Cohen's κ of a ``q × q`` confusion matrix (``confusion[i, j]``: rater A gave label ``i`` and
    rater B label ``j``): scikit-learn's ``cohen_kappa_score`` with ``labels``; ``None`` when chance
    agreement is 1 or there is no pair."""
    cm = np.asarray(confusion, dtype=np.int64)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f"cohen_kappa_table: expected a square confusion matrix, got shape {cm.shape}")
    n = int(cm.sum())
    if n == 0:
        return None
    rows, cols = cm.sum(axis=1), cm.sum(axis=0)
    chance = int((rows * cols).sum())  # n² p_e, exact
    if chance >= n * n:
        return None
    return (n * int(np.trace(cm)) - chance) / (n * n - chance)


@dataclass(frozen=True)
class NominalAgreement:
    """Two-rater nominal agreement over ``n`` items (§7)."""

    n: int
    exact: float
    cohen_kappa: Optional[float]
    gwet_ac1: float

    def as_dict(self) -> Dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class BinaryAgreement:
    """Two-rater binary agreement after dropping abstentions (§7).

    ``abstentions`` = pairs dropped because either rater abstained; ``abstentions_a`` /
    ``abstentions_b`` / ``abstentions_both`` break that count down (``n + abstentions`` is the number
    of pairs given).
    """

    n: int
    exact: Optional[float]
    cohen_kappa: Optional[float]
    gwet_ac1: Optional[float]
    positive_agreement: Optional[float]
    negative_agreement: Optional[float]
    abstentions: int
    abstentions_a: int = 0
    abstentions_b: int = 0
    abstentions_both: int = 0
    table: Tuple[int, int, int, int] = (0, 0, 0, 0)

    def as_dict(self, detail: bool = False) -> Dict[str, object]:
        keys = ["n", "exact", "cohen_kappa", "gwet_ac1", "positive_agreement", "negative_agreement", "abstentions"]
        if detail:
            keys += ["abstentions_a", "abstentions_b", "abstentions_both"]
        out = {k: getattr(self, k) for k in keys}
        if detail:
            out["table"] = dict(zip(("a", "b", "c", "d"), self.table))
        return out


def nominal_agreement(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = NOMINAL_LABELS) -> NominalAgreement:
    """Exact agreement, Cohen's κ and Gwet's AC1 (``q = len(labels)``) over paired labels."""
    _check_pairs(a, b, labels, "nominal_agreement")
    if not a:
        raise ValueError("nominal_agreement: no pairs")
    return NominalAgreement(
        n=len(a), exact=exact_agreement(a, b), cohen_kappa=cohen_kappa(a, b, labels), gwet_ac1=gwet_ac1(a, b, labels)
    )


def binary_agreement(
    a: Sequence[str],
    b: Sequence[str],
    positive: str = "yes",
    negative: str = "no",
    abstain: Iterable[str] = ABSTENTIONS,
) -> BinaryAgreement:
    """Binary agreement on ``positive``/``negative`` pairs; pairs with any abstention are dropped.

    A label that is neither binary nor an abstention is an error (it names the pair).
    """
    abstain = set(abstain)
    _check_pairs(a, b, None, "binary_agreement")
    kept_a: List[str] = []
    kept_b: List[str] = []
    ab_a = ab_b = ab_both = 0
    for i, (x, y) in enumerate(zip(a, b)):
        for lab in (x, y):
            if lab not in (positive, negative) and lab not in abstain:
                raise ValueError(f"binary_agreement: pair {i}: label {lab!r} is neither {positive!r}/{negative!r} "
                                 f"nor an abstention {sorted(abstain)}")
        xa, ya = x in abstain, y in abstain
        if xa or ya:
            ab_a += xa and not ya
            ab_b += ya and not xa
            ab_both += xa and ya
            continue
        kept_a.append(x)
        kept_b.append(y)
    dropped = ab_a + ab_b + ab_both
    n = len(kept_a)
    ta = sum(x == positive and y == positive for x, y in zip(kept_a, kept_b))
    tb = sum(x == positive and y == negative for x, y in zip(kept_a, kept_b))
    tc = sum(x == negative and y == positive for x, y in zip(kept_a, kept_b))
    td = n - ta - tb - tc
    if n == 0:
        return BinaryAgreement(0, None, None, None, None, None, dropped, ab_a, ab_b, ab_both, (0, 0, 0, 0))
    labels = (positive, negative)
    pos_den = 2 * ta + tb + tc
    neg_den = 2 * td + tb + tc
    return BinaryAgreement(
        n=n,
        exact=(ta + td) / n,
        cohen_kappa=cohen_kappa(kept_a, kept_b, labels),
        gwet_ac1=gwet_ac1(kept_a, kept_b, labels),
        positive_agreement=(2 * ta / pos_den) if pos_den else None,
        negative_agreement=(2 * td / neg_den) if neg_den else None,
        abstentions=dropped,
        abstentions_a=ab_a,
        abstentions_b=ab_b,
        abstentions_both=ab_both,
        table=(ta, tb, tc, td),
    )


def two_rater_report(a: Sequence[str], b: Sequence[str]) -> Dict[str, Dict[str, object]]:
    """The ``capaudit human agreement`` JSON: nominal over yes/no/uncertain (q = 3) and binary
    after dropping every item either rater answered ``uncertain`` (q = 2)."""
    nominal = nominal_agreement(a, b, NOMINAL_LABELS)
    binary = binary_agreement(a, b, "yes", "no", abstain=("uncertain",))
    return {"nominal": nominal.as_dict(), "binary": binary.as_dict()}


def consensus(values: Sequence[str], adjudicated: Optional[str] = None, min_raters: int = 2) -> Optional[str]:
    """Consensus label (§7): ``adjudicated`` if given, else the value of a strict majority of at
    least ``min_raters`` raters (``count > n/2`` and ``count ≥ 2``; unanimous ``uncertain`` is kept),
    else ``None``."""
    if adjudicated is not None:
        return adjudicated
    n = len(values)
    if n < min_raters:
        return None
    (top, count), = Counter(values).most_common(1)
    if count >= 2 and 2 * count > n:
        return top
    return None


def symmetrized_pairs(ratings: Mapping[Hashable, Sequence[str]]) -> Tuple[List[str], List[str]]:
    """Pooled human–human pairs: every unordered pair of raters of an item, in both orders (§7).

    Symmetrizing makes both marginals the pooled label distribution, so κ does not depend on which
    rater is called A; :func:`cohen_kappa` of these pairs is therefore not Cohen's κ but Fleiss' κ
    (Scott's π with two raters per item) — use :func:`fleiss_kappa` for it.
    """
    a: List[str] = []
    b: List[str] = []
    for labels in ratings.values():
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                a += [labels[i], labels[j]]
                b += [labels[j], labels[i]]
    return a, b


@dataclass(frozen=True)
class JudgeHumanRecord:
    """One image-phase consensus row: the human label, each judge's answer, weight, cluster, group."""

    item_id: str
    human: str
    judges: Mapping[str, str]
    weight: float
    cluster: str
    surface_group: str


def _weighted_cluster_bootstrap(records: Sequence[Tuple[str, str, float]], clusters: Sequence[Hashable],
                                n_resamples: int, seed: int) -> ClusterBootstrap:
    """:func:`cluster_bootstrap` of weighted exact agreement, run over per-cluster ``(Σw·match, Σw)``.

    Weighted agreement of concatenated clusters is ``Σ num / Σ den`` over the drawn clusters, so
    collapsing each cluster to its two sums gives the same replicates (same draws, same order) at a
    fraction of the cost; ``n_records`` is restored to the record count.
    """
    sums: Dict[Hashable, List[float]] = {}
    for (h, j, w), c in zip(records, clusters):
        s = sums.setdefault(c, [0.0, 0.0])
        s[0] += w * (h == j)
        s[1] += w
    keys = list(sums)

    def stat(rows: List[object]) -> float:
        num = sum(r[0] for r in rows)  # type: ignore[index]
        den = sum(r[1] for r in rows)  # type: ignore[index]
        if den <= 0:
            raise ValueError("judge_human_agreement: a resample has total weight 0")
        return num / den

    res = cluster_bootstrap([tuple(sums[k]) for k in keys], keys, stat, n_resamples=n_resamples, seed=seed)
    return dataclasses.replace(res, n_records=len(records))


def judge_human_agreement(
    records: Sequence[JudgeHumanRecord],
    judges: Sequence[str],
    n_resamples: int = CLUSTER_RESAMPLES,
    seed: int = CLUSTER_SEED,
    labels: Sequence[str] = IMAGE_SUPPORT_LABELS,
) -> Dict[str, Dict[str, object]]:
    """Weighted nominal exact agreement of human consensus vs each judge, with cluster bootstrap (§7).

    Returns ``{judge: {"overall": ClusterBootstrap, "by_surface": [(group, ClusterBootstrap), ...]}}``;
    groups in sorted order, each bootstrapped on its own with the same seed.
    """
    if not records:
        raise ValueError("judge_human_agreement: no consensus records")
    allowed = set(labels)
    for i, r in enumerate(records):
        if r.human not in allowed:
            raise ValueError(f"judge_human_agreement: record {i} ({r.item_id}): human label {r.human!r} not in {list(labels)}")
        for j in judges:
            if j not in r.judges:
                raise ValueError(f"judge_human_agreement: record {i} ({r.item_id}): no answer from judge {j!r}")
            if r.judges[j] not in allowed:
                raise ValueError(f"judge_human_agreement: record {i} ({r.item_id}): judge {j!r} answer "
                                 f"{r.judges[j]!r} not in {list(labels)}")
    out: Dict[str, Dict[str, object]] = {}
    groups = sorted({r.surface_group for r in records})
    for j in judges:
        def run(rs: Sequence[JudgeHumanRecord]) -> ClusterBootstrap:
            return _weighted_cluster_bootstrap([(r.human, r.judges[j], r.weight) for r in rs],
                                               [r.cluster for r in rs], n_resamples, seed)

        out[j] = {
            "overall": run(records),
            "by_surface": [(g, run([r for r in records if r.surface_group == g])) for g in groups],
        }
    return out


__all__ = [
    "ABSTENTIONS",
    "BINARY_LABELS",
    "BinaryAgreement",
    "IMAGE_SUPPORT_LABELS",
    "JudgeHumanRecord",
    "NOMINAL_LABELS",
    "NominalAgreement",
    "binary_agreement",
    "cohen_kappa",
    "cohen_kappa_table",
    "confusion_matrix",
    "consensus",
    "exact_agreement",
    "fixed_rater_pairs",
    "fleiss_kappa",
    "fleiss_kappa_table",
    "gwet_ac1",
    "gwet_ac1_table",
    "judge_human_agreement",
    "krippendorff_alpha_table",
    "nominal_agreement",
    "rating_table",
    "symmetrized_pairs",
    "two_rater_report",
]
