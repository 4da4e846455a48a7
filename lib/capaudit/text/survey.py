"""Text budget and surface-concentration survey (reference-spec §1.3, §2.2–§2.6).

The survey maps over chunks of captions and returns a :class:`SurveySummary` that merges
associatively, so one worker, many workers or a cluster give the same numbers. Hot loops are
vectorised: each caption is tokenised once (``LEX_RE.findall`` on the lower-cased caption),
tokens become 64-bit hashes, and every n-gram, prefix and per-caption statistic for every
budget is computed with numpy from those arrays in one pass (a window of B lexical units keeps
exactly the n-grams that end at unit position <= B).

Exactness: counts are keyed by 64-bit polynomial hashes of the token sequences (token hash =
blake2b-8 of the token). Two different n-grams collide with probability ~2^-64 per pair
(expected collisions < 1e-3 even at 1e8 distinct n-grams). Top-k masses do not depend on how
ties at rank k are broken. The prefix strings listed in ``top_10`` are kept for each chunk's
most frequent prefixes only (descriptive; masses are exact).
"""

from __future__ import annotations

import hashlib
import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .lexical import LEX_RE
from .violations import ALL_CODES, OpenerOptions, ViolationChecker

LEADING_STOPWORDS = frozenset(
    "a an the this that these those image picture photo photograph illustration artwork scene "
    "shows showing depicts depicting features featuring presents displaying displays contains "
    "captures we can see in".split()
)
assert len(LEADING_STOPWORDS) == 29

_P = np.uint64(0x9E3779B97F4A7C15)  # odd multiplier of the polynomial hash
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class SurveyConfig:
    """Survey parameters; defaults follow the reference driver (spec §2.6)."""

    budgets: Tuple[int, ...] = (16, 32, 64, 128, 256)
    ngram_orders: Tuple[int, ...] = (1, 2, 3)
    repeat_orders: Tuple[int, ...] = (3, 4, 5, 6)
    top_ks: Tuple[int, ...] = (10, 100, 1000)
    top_k: int = 100
    prefix_tokens: int = 5
    opener: OpenerOptions = OpenerOptions()
    keep_prefix_strings: int = 1000
    #: Reference quirk (on by default): ``marginal_avg_token_gain`` between consecutive budgets is
    #: computed from ``avg_budget_tokens`` already rounded to 2 decimals, as the reference does
    #: (§1.3). False uses the unrounded averages.
    marginal_gain_from_rounded: bool = True

    def __post_init__(self) -> None:
        if list(self.budgets) != sorted(set(self.budgets)) or not self.budgets or self.budgets[0] < 1:
            raise ValueError(f"budgets must be strictly increasing positive integers, got {self.budgets}")
        for name in ("ngram_orders", "repeat_orders", "top_ks"):
            values = getattr(self, name)
            if not values or any(int(v) < 1 for v in values):
                raise ValueError(f"{name} must be a non-empty list of positive integers, got {values}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be a positive integer, got {self.top_k}")
        if self.prefix_tokens < 1:
            raise ValueError(f"prefix_tokens must be a positive integer, got {self.prefix_tokens}")
        if self.top_k not in self.top_ks:
            object.__setattr__(self, "top_ks", tuple(sorted(set(self.top_ks) | {self.top_k})))


# ---------------------------------------------------------------------------------------------
# keyed counts: the mergeable building block
# ---------------------------------------------------------------------------------------------

@dataclass
class KeyedCounts:
    """Counts per hashed key and window column (columns = budgets + full)."""

    keys: np.ndarray  # uint64, unique
    counts: np.ndarray  # int64 (len(keys), ncols)

    @classmethod
    def empty(cls, ncols: int) -> "KeyedCounts":
        return cls(np.zeros(0, np.uint64), np.zeros((0, ncols), np.int64))

    @classmethod
    def from_occurrences(cls, keys: np.ndarray, cols: np.ndarray, ncols: int) -> "KeyedCounts":
        """Aggregate occurrences; ``cols`` is the first window column containing each one."""
        if keys.size == 0:
            return cls.empty(ncols)
        inv, uniq = pd.factorize(keys)
        counts = np.bincount(inv * ncols + cols, minlength=len(uniq) * ncols).reshape(len(uniq), ncols)
        return cls(np.asarray(uniq, np.uint64), np.cumsum(counts, axis=1))

    def merge(self, other: "KeyedCounts") -> "KeyedCounts":
        return KeyedCounts.merge_many([self, other])

    @staticmethod
    def merge_many(parts: Sequence["KeyedCounts"]) -> "KeyedCounts":
        parts = [p for p in parts if p.keys.size]
        if len(parts) <= 1:
            return parts[0] if parts else KeyedCounts.empty(1)
        keys = np.concatenate([p.keys for p in parts])
        counts = np.concatenate([p.counts for p in parts])
        inv, uniq = pd.factorize(keys)
        out = np.empty((len(uniq), counts.shape[1]), np.int64)
        for j in range(counts.shape[1]):  # float64 weights are exact below 2**53
            out[:, j] = np.bincount(inv, weights=counts[:, j], minlength=len(uniq)).astype(np.int64)
        return KeyedCounts(np.asarray(uniq, np.uint64), out)

    def column_stats(self, col: int, top_ks: Sequence[int]) -> Dict[str, object]:
        c = self.counts[:, col]
        c = c[c > 0]
        total = int(c.sum())
        out: Dict[str, object] = {"distinct": int(c.size), "total": total}
        desc = np.sort(c)[::-1]
        cum = np.cumsum(desc)
        out["top_k_mass"] = {str(k): (float(cum[min(k, desc.size) - 1]) / total if total else 0.0) for k in top_ks}
        if total:
            p = c / total
            h = float(-(p * np.log(p)).sum())
            out["entropy"] = h
            out["entropy_miller_madow"] = h + (c.size - 1) / (2 * total)
            out["effective_vocab"] = math.exp(h)
            out["effective_vocab_miller_madow"] = math.exp(out["entropy_miller_madow"])
            out["hhi"] = float((p * p).sum())
            out["effective_simpson"] = 1.0 / out["hhi"]
        return out


# ---------------------------------------------------------------------------------------------
# hashing helpers
# ---------------------------------------------------------------------------------------------

def _token_hash(tok: str) -> int:
    return int.from_bytes(hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest(), "little")


def _powers(n: int) -> np.ndarray:
    out = np.empty(max(n, 1), np.uint64)
    acc = 1
    for i in range(out.size):
        out[i] = acc
        acc = (acc * int(_P)) & _MASK64
    return out


def _segment_hash(h: np.ndarray, rel: np.ndarray, mask: np.ndarray, seg: np.ndarray, nseg: int,
                  powers: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Hash of the masked tokens of each segment (token order given by ``rel``) and its length.

    ``seg`` must be sorted (tokens grouped by caption), which lets ``reduceat`` do the sums.
    """
    idx = np.flatnonzero(mask)
    sums = np.zeros(nseg, np.uint64)
    lens = np.zeros(nseg, np.int64)
    if idx.size:
        vals = h[idx] * powers[rel[idx]]
        s = seg[idx]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        sums[s[starts]] = np.add.reduceat(vals, starts)
        lens[s[starts]] = np.diff(np.r_[starts, idx.size])
    # mix the length in so that sequences of different length never share a key by construction
    return sums ^ (lens.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)), lens


# ---------------------------------------------------------------------------------------------
# the summary
# ---------------------------------------------------------------------------------------------

@dataclass
class SurveySummary:
    """Mergeable survey state for one surface."""

    config: SurveyConfig
    records: int = 0  # loaded non-empty captions
    with_units: int = 0  # captions with >= 1 lexical unit
    lex_sum: int = 0
    lex_hist: Dict[int, int] = field(default_factory=dict)  # full lex count -> captions
    ngrams: Dict[int, KeyedCounts] = field(default_factory=dict)
    prefix_raw: Optional[KeyedCounts] = None
    prefix_content: Optional[KeyedCounts] = None
    prefix_strings: Dict[int, str] = field(default_factory=dict)
    repeat: Dict[int, np.ndarray] = field(default_factory=dict)  # order -> captions repeating per column
    violations: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (ncols, ncodes)
    violated_any: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (ncols,)
    dedup: Optional[KeyedCounts] = None

    def __post_init__(self) -> None:
        nc = self.ncols
        if not self.ngrams:
            self.ngrams = {n: KeyedCounts.empty(nc) for n in self.config.ngram_orders}
        if self.prefix_raw is None:
            self.prefix_raw = KeyedCounts.empty(nc)
        if self.prefix_content is None:
            self.prefix_content = KeyedCounts.empty(nc)
        if not self.repeat:
            self.repeat = {n: np.zeros(nc, np.int64) for n in self.config.repeat_orders}
        if self.violations.size == 0:
            self.violations = np.zeros((nc, len(ALL_CODES)), np.int64)
            self.violated_any = np.zeros(nc, np.int64)
        if self.dedup is None:
            self.dedup = KeyedCounts.empty(1)

    @property
    def ncols(self) -> int:
        return len(self.config.budgets) + 1

    def merge(self, other: "SurveySummary") -> "SurveySummary":
        """Associative merge (the order of merges does not change any count)."""
        return SurveySummary.merge_all([self, other])

    @staticmethod
    def merge_all(parts: Sequence["SurveySummary"]) -> "SurveySummary":
        """Merge many summaries at once (one hash aggregation per table)."""
        if not parts:
            raise ValueError("nothing to merge")
        cfg = parts[0].config
        if any(p.config != cfg for p in parts):
            raise ValueError("cannot merge survey summaries made with different configurations")
        hist: Dict[int, int] = {}
        strings: Dict[int, str] = {}
        for p in parts:
            for k, v in p.lex_hist.items():
                hist[k] = hist.get(k, 0) + v
            for k, v in p.prefix_strings.items():
                strings.setdefault(k, v)
        merged = lambda get: KeyedCounts.merge_many([get(p) for p in parts])  # noqa: E731
        out = SurveySummary(
            config=cfg,
            records=sum(p.records for p in parts),
            with_units=sum(p.with_units for p in parts),
            lex_sum=sum(p.lex_sum for p in parts),
            lex_hist=hist,
            ngrams={n: merged(lambda p, n=n: p.ngrams[n]) for n in cfg.ngram_orders},
            prefix_raw=merged(lambda p: p.prefix_raw),
            prefix_content=merged(lambda p: p.prefix_content),
            prefix_strings=strings,
            repeat={n: sum(p.repeat[n] for p in parts) for n in cfg.repeat_orders},
            violations=sum(p.violations for p in parts),
            violated_any=sum(p.violated_any for p in parts),
            dedup=merged(lambda p: p.dedup),
        )
        for name in ("prefix_raw", "prefix_content"):  # an all-empty merge yields 1 column
            if getattr(out, name).counts.shape[1] != out.ncols:
                setattr(out, name, KeyedCounts.empty(out.ncols))
        for n, kc in out.ngrams.items():
            if kc.counts.shape[1] != out.ncols:
                out.ngrams[n] = KeyedCounts.empty(out.ncols)
        return out

    # -- final numbers -------------------------------------------------------------------------
    def finalize(self) -> Dict[str, object]:
        """Unrounded metrics; ``budgets[str(B)]`` for each budget and ``full`` for whole captions."""
        cfg = self.config
        lens = np.array(sorted(self.lex_hist), np.int64)
        freq = np.array([self.lex_hist[int(k)] for k in lens], np.int64)
        denom = max(self.with_units, 1)
        out: Dict[str, object] = {
            "records": self.records,
            "captions_with_units": self.with_units,
            "avg_lex": self.lex_sum / denom if self.with_units else 0.0,
            "budgets": {},
        }
        cols = [(str(b), i, b) for i, b in enumerate(cfg.budgets)] + [("full", len(cfg.budgets), None)]
        prev_avg, prev_b = None, None
        for name, col, b in cols:
            block: Dict[str, object] = {}
            if b is not None:
                meets = int(freq[lens >= b].sum())
                block["token_budget"] = b
                block["eligibility"] = meets / self.records if self.records else 0.0
                block["captions_meeting_budget"] = meets
                block["ineligible_count"] = self.records - meets
                block["truncation_rate"] = (int(freq[lens > b].sum()) / self.records) if self.records else 0.0
                pos = lens > 0
                avg_b = float((np.minimum(lens[pos], b) * freq[pos]).sum()) / denom
                block["avg_budget_tokens"] = avg_b
                block["mean_retained_token_fraction"] = float(
                    (np.minimum(lens[pos], b) / np.maximum(1, lens[pos]) * freq[pos]).sum()) / denom
                if prev_b is None:
                    block["marginal_avg_token_gain"] = None
                elif cfg.marginal_gain_from_rounded:  # reference quirk, §1.3
                    block["marginal_avg_token_gain"] = (round(avg_b, 2) - round(prev_avg, 2)) / (b - prev_b)
                else:
                    block["marginal_avg_token_gain"] = (avg_b - prev_avg) / (b - prev_b)
                prev_avg, prev_b = avg_b, b
            block["opener_rate"] = float(self.violations[col, ALL_CODES.index("J_meta_statement")]) / denom
            block["violation_rate"] = float(self.violated_any[col]) / denom
            block["violation_code_rate"] = {c: float(self.violations[col, j]) / denom for j, c in enumerate(ALL_CODES)}
            ng = {n: self.ngrams[n].column_stats(col, cfg.top_ks) for n in cfg.ngram_orders}
            block["distinct"] = {str(n): s["distinct"] / max(1, s["total"]) for n, s in ng.items()}
            block["ngram_top_k_mass"] = {str(n): s["top_k_mass"][str(cfg.top_k)] for n, s in ng.items()}
            block["rep"] = {str(n): float(self.repeat[n][col]) / denom for n in cfg.repeat_orders}
            raw = self.prefix_raw.column_stats(col, cfg.top_ks)
            content = self.prefix_content.column_stats(col, cfg.top_ks)
            block["prefix_top_mass"] = {"raw": raw["top_k_mass"][str(cfg.top_k)],
                                        "content": content["top_k_mass"][str(cfg.top_k)]}
            block["prefix_raw"] = raw
            block["prefix_content"] = content
            block["prefix_content_top_10"] = self._top_strings(self.prefix_content, col, 10)
            out["budgets"][name] = block
        d = self.dedup.counts[:, 0]
        out["dedup"] = {
            "normalized_unique_rate": d.size / denom if self.with_units else 0.0,
            "normalized_duplicate_rate": 1 - d.size / denom if self.with_units else 0.0,
            "duplicate_mass_rate": float(d[d > 1].sum()) / denom if self.with_units else 0.0,
            "max_duplicate_count": int(d.max()) if d.size else 0,
        }
        return out

    def _top_strings(self, kc: KeyedCounts, col: int, k: int) -> List[Tuple[str, int]]:
        c = kc.counts[:, col]
        order = np.argsort(-c, kind="stable")[:k]
        return [(self.prefix_strings.get(int(kc.keys[i]), "<unlisted>"), int(c[i])) for i in order if c[i] > 0]


# ---------------------------------------------------------------------------------------------
# one chunk
# ---------------------------------------------------------------------------------------------

class _ChunkSurveyor:
    def __init__(self, config: SurveyConfig):
        self.config = config
        self.checker = ViolationChecker(config.opener)
        self.hash_cache: Dict[str, int] = {}
        self.stop_cache: Dict[str, bool] = {}
        self.budgets = np.array(config.budgets, np.int64)

    def __call__(self, captions: Sequence[str]) -> SurveySummary:
        cfg = self.config
        nb = len(cfg.budgets)
        ncols = nb + 1
        summ = SurveySummary(config=cfg)
        caps = [c.strip() for c in captions]
        caps = [c for c in caps if c]
        summ.records = len(caps)
        if not caps:
            return summ
        findall = LEX_RE.findall
        toks = [findall(c.lower()) for c in caps]
        lens = np.fromiter(map(len, toks), np.int64, len(toks))
        C = len(caps)
        has = lens > 0
        summ.with_units = int(has.sum())
        summ.lex_sum = int(lens.sum())
        ul, uc = np.unique(lens, return_counts=True)
        summ.lex_hist = {int(a): int(b) for a, b in zip(ul, uc)}
        T = int(lens.sum())
        if T == 0:
            return summ
        flat = np.empty(T, dtype=object)
        flat[:] = list(chain.from_iterable(toks))
        codes, uniq = pd.factorize(flat)
        cache = self.hash_cache
        th = np.fromiter((cache[u] if u in cache else cache.setdefault(u, _token_hash(u)) for u in uniq),
                         np.uint64, len(uniq))
        stop_u = np.fromiter((u in LEADING_STOPWORDS for u in uniq), bool, len(uniq))
        h = th[codes]
        starts = np.cumsum(lens) - lens
        cid = np.repeat(np.arange(C), lens)
        pos = np.arange(T) - starts[cid]
        clen = lens[cid]

        # n-grams: occurrence (start i, order n) ends at unit pos+n; it lies in window B iff pos+n <= B
        maxn = max(max(cfg.ngram_orders), max(cfg.repeat_orders))
        powers = _powers(max(maxn, cfg.prefix_tokens) + 1)
        for n in sorted(set(cfg.ngram_orders) | set(cfg.repeat_orders)):
            valid = np.flatnonzero(pos + n <= clen)
            key = np.zeros(valid.size, np.uint64)
            for j in range(n):
                key = key * _P + h[valid + j]
            end = pos[valid] + n
            col = np.searchsorted(self.budgets, end, side="left")
            if n in cfg.ngram_orders:
                summ.ngrams[n] = KeyedCounts.from_occurrences(key, col, ncols)
            if n in cfg.repeat_orders:
                summ.repeat[n] = self._repeats(key, cid[valid], col, C, ncols)

        # prefixes: raw = first k units of the window; content = after leading stopwords
        k = cfg.prefix_tokens
        is_stop = stop_u[codes]
        nonstop_pos = np.where(is_stop, np.iinfo(np.int64).max, pos)
        first = np.full(C, np.iinfo(np.int64).max, np.int64)
        first[has] = np.minimum.reduceat(nonstop_pos, starts[has])
        s = np.minimum(first, lens)  # number of leading stopwords
        raw_keys, content_keys = [], []
        for b in list(cfg.budgets) + [None]:
            lim = lens if b is None else np.minimum(lens, b)
            raw_mask = pos < np.minimum(k, lim)[cid]
            rk, _ = _segment_hash(h, pos, raw_mask, cid, C, powers)
            sc = s[cid]
            cmask = (pos >= sc) & (pos < np.minimum(sc + k, lim[cid]))
            ck, clens = _segment_hash(h, np.maximum(pos - sc, 0), cmask, cid, C, powers)
            raw_keys.append(np.where(has, rk, np.uint64(0)))
            content_keys.append(np.where(clens > 0, ck, np.uint64(0)))
        summ.prefix_raw = self._prefix_counts(raw_keys, ncols)
        summ.prefix_content = self._prefix_counts(content_keys, ncols)
        summ.prefix_strings = self._prefix_strings(summ.prefix_content, content_keys, toks, s)

        # per-caption dedup hash over all units
        dk, _ = _segment_hash(h, pos, np.ones(T, bool), cid, C, _powers(int(lens.max()) + 1))
        summ.dedup = KeyedCounts.from_occurrences(dk[has], np.zeros(int(has.sum()), np.int64), 1)

        # violation catalog on each distinct window text (lexical cut), captions with >= 1 unit
        summ.violations, summ.violated_any = self._violations(caps, lens, ncols)
        return summ

    @staticmethod
    def _repeats(key: np.ndarray, cid: np.ndarray, col: np.ndarray, C: int, ncols: int) -> np.ndarray:
        """Captions whose window holds some n-gram twice, per column (windows nest)."""
        out = np.zeros(ncols, np.int64)
        if key.size == 0:
            return out
        ck = key ^ (cid.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(0x165667B19E3779F9))
        dup_of_earlier = pd.Series(ck).duplicated().to_numpy()
        dup = dup_of_earlier  # occurrences are in caption/position order: first = earliest end
        if not dup.any():
            return out
        rep_col = np.full(C, ncols, np.int64)
        np.minimum.at(rep_col, cid[dup], col[dup])
        hist = np.bincount(rep_col, minlength=ncols + 1)[:ncols]
        return np.cumsum(hist)

    @staticmethod
    def _prefix_counts(keys_per_col: List[np.ndarray], ncols: int) -> KeyedCounts:
        """One prefix per caption and column (0 = none); columns can differ, so count each."""
        allk, allc = [], []
        for col, kk in enumerate(keys_per_col):
            valid = kk != 0
            allk.append(kk[valid])
            allc.append(np.full(int(valid.sum()), col, np.int64))
        keys = np.concatenate(allk)
        cols = np.concatenate(allc)
        inv, uniq = pd.factorize(keys)
        counts = np.bincount(inv * ncols + cols, minlength=len(uniq) * ncols).reshape(len(uniq), ncols)
        return KeyedCounts(np.asarray(uniq, np.uint64), counts)

    def _prefix_strings(self, kc: KeyedCounts, content_keys: List[np.ndarray], toks, s) -> Dict[int, str]:
        keep = self.config.keep_prefix_strings
        if kc.keys.size == 0 or keep <= 0:
            return {}
        score = kc.counts.max(axis=1)
        top = set(int(x) for x in kc.keys[np.argsort(-score, kind="stable")[:keep]])
        out: Dict[int, str] = {}
        k = self.config.prefix_tokens
        budgets = list(self.config.budgets) + [None]
        for col, ck in enumerate(content_keys):
            b = budgets[col]
            for i in np.flatnonzero(np.isin(ck, np.fromiter(top, np.uint64, len(top)))):
                key = int(ck[i])
                if key in out:
                    continue
                lim = len(toks[i]) if b is None else min(len(toks[i]), b)
                out[key] = " ".join(toks[i][s[i]: min(s[i] + k, lim)])
            if len(out) >= len(top):
                break
        return out

    def _violations(self, caps: List[str], lens: np.ndarray, ncols: int) -> Tuple[np.ndarray, np.ndarray]:
        """Codes per column: the catalog runs once per distinct window text of a caption."""
        budgets = list(self.config.budgets)
        # every column whose budget covers the caption uses the caption itself (window index i)
        windows: List[str] = list(caps)
        win_of = np.repeat(np.arange(len(caps))[:, None], ncols, axis=1)
        for i in np.flatnonzero(lens > budgets[0]).tolist():
            text, n = caps[i], int(lens[i])
            cut = [c for c, b in enumerate(budgets) if n > b]
            for c, e in zip(cut, _unit_ends(text, [budgets[c] for c in cut])):
                win_of[i, c] = len(windows)
                windows.append(text[:e].strip())
        found = self.checker.matrix(windows)
        counts = np.zeros((ncols, len(ALL_CODES)), np.int64)
        anyv = np.zeros(ncols, np.int64)
        has = lens > 0
        any_found = found.any(axis=1)
        for col in range(ncols):
            idx = win_of[has, col]
            counts[col] = found[idx].sum(axis=0)
            anyv[col] = int(any_found[idx].sum())
        return counts, anyv


def _unit_ends(text: str, budgets: List[int]) -> List[int]:
    """End offsets of the B-th lexical unit for each budget B (each < the unit count)."""
    want = {b: k for k, b in enumerate(budgets)}
    out = [0] * len(budgets)
    last = budgets[-1]
    for i, m in enumerate(LEX_RE.finditer(text), start=1):
        if i in want:
            out[want[i]] = m.end()
            if i == last:
                break
    return out


# ---------------------------------------------------------------------------------------------
# drivers
# ---------------------------------------------------------------------------------------------

_WORKER: Optional[_ChunkSurveyor] = None


def _init_worker(config: SurveyConfig) -> None:
    global _WORKER
    _WORKER = _ChunkSurveyor(config)


def _run_chunk(chunk: List[str]) -> SurveySummary:
    assert _WORKER is not None
    return _WORKER(chunk)


def _chunks(captions: Iterable[str], size: int) -> Iterator[List[str]]:
    it = iter(captions)
    while True:
        chunk = list(islice(it, size))
        if not chunk:
            return
        yield chunk


def survey_captions(captions: Iterable[str], config: SurveyConfig = SurveyConfig(), workers: int = 1,
                    chunk_size: int = 50_000, merge_every: int = 8) -> SurveySummary:
    """Survey a stream of captions; the result does not depend on ``workers`` or ``chunk_size``.

    The input is consumed lazily (at most ``2 * workers`` chunks in flight) and partial
    summaries are merged every ``merge_every`` chunks, so memory is bounded by the number of
    distinct n-grams, not by the corpus.
    """
    pending: List[SurveySummary] = [SurveySummary(config=config)]

    def add(part: SurveySummary) -> None:
        pending.append(part)
        if len(pending) > merge_every:
            pending[:] = [SurveySummary.merge_all(pending)]

    if workers <= 1:
        surveyor = _ChunkSurveyor(config)
        for chunk in _chunks(captions, chunk_size):
            add(surveyor(chunk))
    else:
        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(config,)) as pool:
            inflight = []
            for chunk in _chunks(captions, chunk_size):
                inflight.append(pool.submit(_run_chunk, chunk))
                if len(inflight) >= 2 * workers:
                    add(inflight.pop(0).result())
            for fut in inflight:
                add(fut.result())
    return SurveySummary.merge_all(pending)


def survey_surface(captions: Iterable[str], config: SurveyConfig = SurveyConfig(), workers: int = 1) -> Dict[str, object]:
    """Convenience wrapper: survey and finalize."""
    return survey_captions(captions, config, workers).finalize()
