"""Text budget and surface-concentration survey (reference-spec §1.3, §2.2–§2.6).

The survey maps over chunks of captions and returns a :class:`SurveySummary` that merges
associatively, so one worker, many workers or a cluster give the same numbers
(:func:`survey_files` runs it over sharded inputs on the local or the Ray engine). Hot loops are
vectorised: the lower-cased captions of a chunk are tokenised together in numpy
(:func:`tokenize_batch`, identical to ``LEX_RE.findall``), tokens become 64-bit hashes, and every
n-gram, prefix and per-caption statistic for every budget is computed from those arrays in one
pass (a window of B lexical units keeps exactly the n-grams that end at unit position <= B). The
violation catalog runs on each caption once and on its B-windows only where a window can differ
from the caption (see ``_ChunkSurveyor._violations``).

Memory: exact counts keep every distinct key; ``spill_dir`` bounds the keys held in memory
(:class:`SurveySpill`: sorted, hash-partitioned runs on disk) and ``SurveyConfig(distinct="hll")``
replaces the n-gram tables by HyperLogLog sketches.

Exactness: counts are keyed by 64-bit polynomial hashes of the token sequences (token hash =
blake2b-8 of the token). Two different n-grams collide with probability ~2^-64 per pair
(expected collisions < 1e-3 even at 1e8 distinct n-grams). Top-k masses do not depend on how
ties at rank k are broken. The prefix strings listed in ``top_10`` are kept for each chunk's
most frequent prefixes only (descriptive; masses are exact).
"""

from __future__ import annotations

import hashlib
import re
import math
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..budgets import DEFAULT_BUDGETS
from .lexical import LEX_RE
from .lexkernel import tokenize_batch
from .violations import ALL_CODES, REPETITION_CODE, OpenerOptions, ViolationChecker, max_gram_count

#: The window every per-budget statistic and the violation catalog use (spec §1.2, §2.2), named in
#: the outputs it feeds.
WINDOW_DEFINITION = ("lex-cut window (as the reference): a caption of more than B lexical units is cut at the end "
                     "of the B-th unit and the cut text stripped; a caption of at most B units is kept whole, "
                     "unstripped")

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

    budgets: Tuple[int, ...] = DEFAULT_BUDGETS
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
    #: ``exact`` (default) counts every distinct n-gram; ``hll`` estimates Distinct-n with a
    #: HyperLogLog sketch of ``2**hll_precision`` registers per order and column (relative standard
    #: error 1.04 / sqrt(2**p), 0.81 % at p = 14) and leaves n-gram top-k mass and entropy out.
    distinct: str = "exact"
    hll_precision: int = 14

    def __post_init__(self) -> None:
        if self.distinct not in ("exact", "hll"):
            raise ValueError(f"distinct must be 'exact' or 'hll', got {self.distinct!r}")
        if not 4 <= int(self.hll_precision) <= 18:
            raise ValueError(f"hll_precision must be in 4..18, got {self.hll_precision}")
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
        return _counts_from_codes(inv, uniq, cols, ncols)

    def merge(self, other: "KeyedCounts") -> "KeyedCounts":
        return KeyedCounts.merge_many([self, other])

    @staticmethod
    def merge_many(parts: Sequence["KeyedCounts"]) -> "KeyedCounts":
        parts = [p for p in parts if p.keys.size]
        if len(parts) <= 1:
            return parts[0] if parts else KeyedCounts.empty(1)
        keys = np.concatenate([p.keys for p in parts])
        inv, uniq = pd.factorize(keys)
        # the first part's keys are distinct and come first, so they are numbered 0, 1, ...: its rows
        # are the first rows of the result, and only the other parts' rows are added in
        first = parts[0]
        out = np.zeros((len(uniq), first.counts.shape[1]), np.int64)
        out[: first.keys.size] = first.counts
        tail = inv[first.keys.size:]
        counts = np.concatenate([p.counts for p in parts[1:]])
        for j in range(counts.shape[1]):  # float64 weights are exact below 2**53
            out[:, j] += np.bincount(tail, weights=counts[:, j], minlength=len(uniq)).astype(np.int64)
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
    ngram_hll: Dict[int, np.ndarray] = field(default_factory=dict)  # distinct="hll": (ncols, 2**p) registers
    ngram_totals: Dict[int, np.ndarray] = field(default_factory=dict)  # distinct="hll": occurrences per column
    spill: Optional["SurveySpill"] = field(default=None, compare=False, repr=False)
    #: rows read from sharded inputs (:func:`survey_files`): rows, records, rows_without_caption,
    #: rows_missing_field, rows_empty_caption; ``fields``: field names seen
    load: Dict[str, object] = field(default_factory=dict)

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
        if self.config.distinct == "hll":
            m = 1 << self.config.hll_precision
            for n in self.config.ngram_orders:
                self.ngram_hll.setdefault(n, np.zeros((nc, m), np.uint8))
                self.ngram_totals.setdefault(n, np.zeros(nc, np.int64))

    def keyed_tables(self) -> Dict[str, KeyedCounts]:
        """The exact keyed tables by name (what :class:`SurveySpill` moves to disk)."""
        out = {f"ngram{n}": kc for n, kc in self.ngrams.items() if self.config.distinct == "exact"}
        out.update(prefix_raw=self.prefix_raw, prefix_content=self.prefix_content, dedup=self.dedup)
        return out

    def clear_keyed_tables(self) -> None:
        nc = self.ncols
        self.ngrams = {n: KeyedCounts.empty(nc) for n in self.config.ngram_orders}
        self.prefix_raw = KeyedCounts.empty(nc)
        self.prefix_content = KeyedCounts.empty(nc)
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
        spills = {id(p.spill): p.spill for p in parts if p.spill is not None}
        if len(spills) > 1:
            raise ValueError("cannot merge survey summaries spilled to different places")
        hll = cfg.distinct == "hll"
        out = SurveySummary(
            config=cfg,
            records=sum(p.records for p in parts),
            with_units=sum(p.with_units for p in parts),
            lex_sum=sum(p.lex_sum for p in parts),
            lex_hist=hist,
            ngrams={} if hll else {n: merged(lambda p, n=n: p.ngrams[n]) for n in cfg.ngram_orders},
            prefix_raw=merged(lambda p: p.prefix_raw),
            prefix_content=merged(lambda p: p.prefix_content),
            prefix_strings=strings,
            repeat={n: sum(p.repeat[n] for p in parts) for n in cfg.repeat_orders},
            violations=sum(p.violations for p in parts),
            violated_any=sum(p.violated_any for p in parts),
            dedup=merged(lambda p: p.dedup),
            ngram_hll={n: np.maximum.reduce([p.ngram_hll[n] for p in parts]) for n in cfg.ngram_orders} if hll else {},
            ngram_totals={n: sum(p.ngram_totals[n] for p in parts) for n in cfg.ngram_orders} if hll else {},
            spill=next(iter(spills.values()), None),
            load=_merge_load([p.load for p in parts]),
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
        spilled = self.spill.stats(self) if self.spill is not None else None

        def stats(table: str, kc: KeyedCounts, col: int) -> Dict[str, object]:
            if spilled is not None and table in spilled:
                return spilled[table][col]
            return kc.column_stats(col, cfg.top_ks)

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
            if cfg.distinct == "hll":
                ng = {n: self._hll_stats(n, col) for n in cfg.ngram_orders}
            else:
                ng = {n: stats(f"ngram{n}", self.ngrams[n], col) for n in cfg.ngram_orders}
            block["distinct"] = {str(n): s["distinct"] / max(1, s["total"]) for n, s in ng.items()}
            block["ngram_top_k_mass"] = {str(n): s["top_k_mass"][str(cfg.top_k)] for n, s in ng.items()}
            block["rep"] = {str(n): float(self.repeat[n][col]) / denom for n in cfg.repeat_orders}
            raw = stats("prefix_raw", self.prefix_raw, col)
            content = stats("prefix_content", self.prefix_content, col)
            block["prefix_top_mass"] = {"raw": raw["top_k_mass"][str(cfg.top_k)],
                                        "content": content["top_k_mass"][str(cfg.top_k)]}
            block["prefix_raw"] = raw
            block["prefix_content"] = content
            if spilled is not None and "prefix_content_top_10" in spilled:
                block["prefix_content_top_10"] = spilled["prefix_content_top_10"][col]
            else:
                block["prefix_content_top_10"] = self._top_strings(self.prefix_content, col, 10)
            out["budgets"][name] = block
        if spilled is not None:
            unique, dup_mass, max_dup = spilled["dedup"]
            self.spill.close()
            self.spill = None
        else:
            d = self.dedup.counts[:, 0]
            unique, dup_mass, max_dup = d.size, int(d[d > 1].sum()), (int(d.max()) if d.size else 0)
        out["dedup"] = {
            "normalized_unique_rate": unique / denom if self.with_units else 0.0,
            "normalized_duplicate_rate": 1 - unique / denom if self.with_units else 0.0,
            "duplicate_mass_rate": float(dup_mass) / denom if self.with_units else 0.0,
            "max_duplicate_count": max_dup,
        }
        return out

    def _hll_stats(self, n: int, col: int) -> Dict[str, object]:
        from capaudit.engine.hll import HyperLogLog

        est = HyperLogLog(self.config.hll_precision, self.ngram_hll[n][col]).estimate()
        return {"distinct": est, "total": int(self.ngram_totals[n][col]), "distinct_estimate": "hll",
                "top_k_mass": {str(k): None for k in self.config.top_ks}}

    def _top_strings(self, kc: KeyedCounts, col: int, k: int) -> List[Tuple[str, int]]:
        c = kc.counts[:, col]
        order = np.argsort(-c, kind="stable")[:k]
        return [(self.prefix_strings.get(int(kc.keys[i]), "<unlisted>"), int(c[i])) for i in order if c[i] > 0]


# ---------------------------------------------------------------------------------------------
# one chunk
# ---------------------------------------------------------------------------------------------

_REP_COL = ALL_CODES.index(REPETITION_CODE)
_REP_N, _REP_AT = 5, 10  # F_repetition: a 5-gram of whitespace words occurring >= 10 times
# ASCII bytes: whitespace, and "non-whitespace that is not a letter or digit"
_WS = np.zeros(256, bool)
_WS[[c for c in range(128) if chr(c).isspace()]] = True
_UNITLESS_WORD = re.compile(r"(?<!\S)(?:[^\w\s]|_)+(?!\S)")  # a whitespace word without [^\W_]
_PUNCT = np.zeros(256, bool)
_PUNCT[[c for c in range(128) if not chr(c).isspace() and not chr(c).isalnum()]] = True


class _ChunkSurveyor:
    def __init__(self, config: SurveyConfig):
        self.config = config
        self.checker = ViolationChecker(config.opener)
        self.hash_cache: Dict[str, int] = {}
        self.word_cache: Dict[str, int] = {}
        self.budgets = np.array(config.budgets, np.int64)

    def __call__(self, captions: Sequence[str]) -> SurveySummary:
        cfg = self.config
        nb = len(cfg.budgets)
        ncols = nb + 1
        summ = SurveySummary(config=cfg)
        # captions as given (the loaders strip them; spec §2.1), the empty ones left out: a caption of
        # at most B units is its own window, kept whole and unstripped (spec §2.2 "Exact catalog")
        caps = [c for c in captions if c and not c.isspace()]
        summ.records = len(caps)
        if not caps:
            return summ
        lows = [c.lower() for c in caps]
        lens, codes, uniq = tokenize_batch(lows)
        C = len(caps)
        has = lens > 0
        summ.with_units = int(has.sum())
        summ.lex_sum = int(lens.sum())
        ul, uc = np.unique(lens, return_counts=True)
        summ.lex_hist = {int(a): int(b) for a, b in zip(ul, uc)}
        T = int(lens.sum())
        if T == 0:
            return summ
        cache = self.hash_cache
        th = np.fromiter((cache[u] if u in cache else cache.setdefault(u, _token_hash(u)) for u in uniq),
                         np.uint64, len(uniq))
        stop_u = np.fromiter((u in LEADING_STOPWORDS for u in uniq), bool, len(uniq))
        h = th[codes]
        unigram_ok = np.unique(th).size == th.size  # no 64-bit collision among this chunk's tokens
        starts = np.cumsum(lens) - lens
        cid = np.repeat(np.arange(C), lens)
        pos = np.arange(T) - starts[cid]
        clen = lens[cid]
        left = clen - pos  # units from this one to the caption's end

        # n-grams: the occurrence starting at pos with order n ends at pos + n; in window B iff pos + n <= B
        rep_orders = sorted(cfg.repeat_orders)
        full_orders = sorted(set(cfg.ngram_orders) | {rep_orders[0]})
        # the window column of an n-gram ending at unit e: the first budget >= e (one lookup per occurrence)
        col_of_end = np.searchsorted(self.budgets, np.arange(int(lens.max()) + 1), side="left")
        key = h.copy()
        max_rep_count = np.full(C, _REP_AT, np.int64)
        rep_pos = rep_cnt = None
        for n in range(1, max(full_orders) + 1):
            if n > 1:
                key = key[:-1] * _P + h[n - 1:]
            if n not in full_orders:
                continue
            valid = np.flatnonzero(left[: key.size] >= n)
            k = key[valid]
            gram_codes = None  # the occurrences' n-grams numbered by first appearance, once computed
            col = col_of_end[pos[valid] + n]
            if n in cfg.ngram_orders:
                if cfg.distinct == "hll":
                    summ.ngram_hll[n], summ.ngram_totals[n] = _hll_columns(k, col, ncols, cfg.hll_precision)
                elif n == 1 and unigram_ok:  # unigram keys are the token hashes, numbered like the tokens
                    summ.ngrams[n] = _counts_from_codes(codes, th, col, ncols)
                    gram_codes = codes[valid]
                else:
                    gram_codes, uniq_keys = pd.factorize(k)
                    summ.ngrams[n] = _counts_from_codes(gram_codes, uniq_keys, col, ncols)
            if n == rep_orders[0]:
                if gram_codes is None:
                    gram_codes = pd.factorize(k)[0]
                summ.repeat[n], rep_cnt = _repeats_by_code(gram_codes, cid[valid], col, ncols)
                rep_pos = valid
                if n <= _REP_N:  # (see _rep_candidates)
                    max_rep_count = _max_per_caption(cid[valid], rep_cnt, C)
        prev_n = rep_orders[0]
        for n in rep_orders[1:]:
            # an n-gram occurrence can repeat only if its first (n-1) units occur twice in the caption
            # (orders in between are the prefixes of these, so the previous order bounds them too)
            sel = rep_pos[(rep_cnt >= 2) & (left[rep_pos] >= n)] if n - prev_n == 1 else None
            if sel is None:
                sel = rep_pos[left[rep_pos] >= n]
            k = np.zeros(sel.size, np.uint64)
            for j in range(n):
                k = k * _P + h[sel + j]
            col = col_of_end[pos[sel] + n]
            summ.repeat[n], rep_cnt = _repeats_by_code(pd.factorize(k)[0], cid[sel], col, ncols)
            rep_pos, prev_n = sel, n

        # prefixes: raw = first k units of the window; content = after the leading stopwords
        kp = cfg.prefix_tokens
        powers = _powers(max(kp, 1) + 1)
        is_stop = stop_u[codes]
        big = np.iinfo(np.int64).max
        nonstop_pos = np.where(is_stop, big, pos)
        first = np.full(C, big, np.int64)
        first[has] = np.minimum.reduceat(nonstop_pos, starts[has])
        s = np.minimum(first, lens)
        near = np.flatnonzero(pos < (s + kp)[cid])  # the only tokens a prefix can use
        hn, pn, cn = h[near], pos[near], cid[near]
        sn = s[cn]
        raw_keys, content_keys = [], []
        for b in list(cfg.budgets) + [None]:
            lim = lens if b is None else np.minimum(lens, b)
            raw_mask = pn < np.minimum(kp, lim)[cn]
            rk, _ = _segment_hash(hn, pn, raw_mask, cn, C, powers)
            cmask = (pn >= sn) & (pn < np.minimum(sn + kp, lim[cn]))
            ck, cl = _segment_hash(hn, np.maximum(pn - sn, 0), cmask, cn, C, powers)
            raw_keys.append(np.where(has, rk, np.uint64(0)))
            content_keys.append(np.where(cl > 0, ck, np.uint64(0)))
        summ.prefix_raw = _prefix_counts(raw_keys, ncols)
        summ.prefix_content = _prefix_counts(content_keys, ncols)
        summ.prefix_strings = self._prefix_strings(summ.prefix_content, content_keys, codes, uniq, starts, lens, s)

        # per-caption dedup hash over all units
        dk, _ = _segment_hash(h, pos, np.ones(T, bool), cid, C, _powers(int(lens.max()) + 1))
        summ.dedup = KeyedCounts.from_occurrences(dk[has], np.zeros(int(has.sum()), np.int64), 1)

        # which literal words of the catalog each caption's units hold (cached per distinct unit)
        wcache = self.word_cache
        um = np.fromiter((wcache[u] if u in wcache else wcache.setdefault(u, self.checker.unit_word_mask(u))
                          for u in uniq), np.uint64, len(uniq))
        word_masks = np.zeros(C, np.uint64)
        word_masks[has] = np.bitwise_or.reduceat(um[codes], starts[has])
        summ.violations, summ.violated_any = self._violations(caps, lows, lens, ncols, max_rep_count, word_masks)
        return summ

    def _prefix_strings(self, kc: KeyedCounts, content_keys: List[np.ndarray], codes, uniq, starts, lens,
                        s) -> Dict[int, str]:
        keep = self.config.keep_prefix_strings
        if kc.keys.size == 0 or keep <= 0:
            return {}
        score = kc.counts.max(axis=1)
        top_arr = kc.keys[np.argsort(-score, kind="stable")[:keep]]
        top = set(int(x) for x in top_arr)
        out: Dict[int, str] = {}
        k = self.config.prefix_tokens
        budgets = list(self.config.budgets) + [None]
        for col, ck in enumerate(content_keys):
            b = budgets[col]
            hit = np.flatnonzero(pd.Series(ck).isin(top_arr).to_numpy())
            keys_hit, first = np.unique(ck[hit], return_index=True)
            for i in sorted(hit[first].tolist()):
                key = int(ck[i])
                if key in out:
                    continue
                lim = int(lens[i]) if b is None else min(int(lens[i]), b)
                a = int(starts[i])
                out[key] = " ".join(uniq[c] for c in codes[a + s[i]: a + min(s[i] + k, lim)].tolist())
            if len(out) >= len(top):
                break
        return out

    def _violations(self, caps, lows, lens, ncols, max_rep_count, word_masks=None):
        """Codes per column (spec §2.2 "Exact catalog": a caption of more than B units is cut after the
        B-th unit and the cut text stripped; one of at most B units is kept whole, unstripped). A cut
        window of a caption without leading whitespace is a prefix of it that ends where a lexical
        unit ends, so (regex semantics) a code can match the window only if it matches the caption,
        unless a pattern looks past the end of its match (\\b: only when a cut is followed by "_"),
        and a 5-gram of whitespace words can occur in a window at most once more than in the
        caption (the last, possibly cut, word). Windows are therefore checked only for captions
        that have a code, contain "_", have a 5-gram occurring >= 9 times, or start with whitespace
        (stripping it may let a line-start pattern match)."""
        budgets = list(self.config.budgets)
        C = len(caps)
        full = self.checker.matrix(caps, lows, repetition=False, word_masks=word_masks)
        # F_repetition on the whole caption, and near misses (count 9) whose windows may reach 10
        rep_cands = self._rep_candidates(lows, lens, max_rep_count)
        near = np.zeros(C, bool)
        for i in rep_cands:
            m = max_gram_count(lows[i], _REP_AT - 1, _REP_N)
            if m >= _REP_AT:
                full[i, _REP_COL] = True
            if m >= _REP_AT - 1:
                near[i] = True
        need = full.any(axis=1) | near
        if self.checker.end_sensitivity == "any":
            need[:] = True
        elif self.checker.end_sensitivity == "word":  # a cut is followed by "_" only if the caption has one
            need |= np.fromiter(("_" in c for c in caps), bool, C)
        need |= np.fromiter((c[0].isspace() for c in caps), bool, C)
        need &= lens > budgets[0]
        windows: List[str] = []
        win_of = np.repeat(np.arange(C)[:, None], ncols, axis=1)
        for i in np.flatnonzero(need).tolist():
            text, n = caps[i], int(lens[i])
            cut = [c for c, b in enumerate(budgets) if n > b]
            for c, e in zip(cut, _unit_ends(text, [budgets[c] for c in cut])):
                win_of[i, c] = C + len(windows)
                windows.append(text[:e].strip())
        found = np.concatenate([full, self.checker.matrix(windows)]) if windows else full
        counts = np.zeros((ncols, len(ALL_CODES)), np.int64)
        anyv = np.zeros(ncols, np.int64)
        has = lens > 0
        any_found = found.any(axis=1)
        for col in range(ncols):
            idx = win_of[has, col]
            counts[col] = found[idx].sum(axis=0)
            anyv[col] = int(any_found[idx].sum())
        return counts, anyv

    @staticmethod
    def _rep_candidates(lows, lens, max_rep_count) -> List[int]:
        """Captions that may hold a 5-gram of whitespace words occurring >= 9 times. Such a 5-gram
        has >= 3 lexical units (its first three then form a lexical 3-gram occurring >= 9 times in
        the caption) or >= 3 words without a unit (then >= 9 such words, each preceded by
        whitespace or the start and beginning with a non-alphanumeric character)."""
        at = _REP_AT - 1
        out = set(np.flatnonzero(max_rep_count >= at).tolist())
        C = len(lows)
        ascii_ = np.fromiter(map(str.isascii, lows), bool, C)
        long_ = np.fromiter(map(len, lows), np.int64, C) >= 2 * (_REP_N + at - 1) - 1
        for i in np.flatnonzero(long_ & ~ascii_).tolist():  # count the words without a unit
            if len(_UNITLESS_WORD.findall(lows[i])) >= at:
                out.add(i)
        idx = np.flatnonzero(long_ & ascii_)
        if idx.size:
            texts = [lows[i] for i in idx.tolist()]
            buf = np.frombuffer(("\x00" + "\x00".join(texts)).encode("ascii"), np.uint8)
            starts = np.zeros(len(texts), np.int64)
            starts[1:] = np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts))[:-1] + 1)
            # position j starts a unit-less candidate if buf[j] is punctuation and buf[j-1] is
            # whitespace or the NUL before the text
            hit = _PUNCT[buf[1:]] & (_WS[buf[:-1]] | (buf[:-1] == 0))
            where = np.flatnonzero(hit)
            owner = np.searchsorted(starts, where, side="right") - 1
            cnt = np.bincount(owner, minlength=len(texts))
            out.update(idx[cnt >= at].tolist())
        return sorted(out)


def _hll_columns(keys: np.ndarray, cols: np.ndarray, ncols: int, p: int) -> Tuple[np.ndarray, np.ndarray]:
    """HyperLogLog registers per window column (an occurrence counts in its column and every
    wider one) and the occurrences per column."""
    from capaudit.engine.hll import register_updates

    regs = np.zeros((ncols, 1 << p), np.uint8)
    if keys.size:
        idx, rank = register_updates(keys, p)
        np.maximum.at(regs, (cols, idx), rank)
        np.maximum.accumulate(regs, axis=0, out=regs)
    return regs, np.cumsum(np.bincount(cols, minlength=ncols)[:ncols])


def _counts_from_codes(codes: np.ndarray, keys: np.ndarray, cols: np.ndarray, ncols: int) -> KeyedCounts:
    """``KeyedCounts.from_occurrences`` when the occurrences are already numbered by first appearance."""
    counts = np.bincount(codes * ncols + cols, minlength=keys.size * ncols).reshape(keys.size, ncols)
    return KeyedCounts(np.asarray(keys, np.uint64), np.cumsum(counts, axis=1))


def _repeats_by_code(gram: np.ndarray, cid: np.ndarray, col: np.ndarray, ncols: int) -> Tuple[np.ndarray, np.ndarray]:
    """Captions whose window holds some n-gram twice, per column (windows nest), and, per
    occurrence, how often its n-gram occurs in its caption, from the occurrences' n-gram codes
    (dense, < their count): one sort of ``code * T + occurrence`` puts each caption's occurrences
    of one n-gram side by side in position order (occurrences are grouped by caption), so no hash
    of (caption, n-gram) is needed."""
    out = np.zeros(ncols, np.int64)
    T = gram.size
    if T == 0:
        return out, np.zeros(0, np.int64)
    s = np.sort(gram.astype(np.int64) * T + np.arange(T, dtype=np.int64))  # < T**2: no overflow below 3e9
    code = s // T
    occ = s - code * T
    owner = cid[occ]
    same = (code[1:] == code[:-1]) & (owner[1:] == owner[:-1])
    run_start = np.flatnonzero(np.r_[True, ~same])
    run_len = np.diff(np.r_[run_start, T])
    counts = np.empty(T, np.int64)
    counts[occ] = np.repeat(run_len, run_len)
    dup = np.zeros(T, bool)
    dup[occ[1:][same]] = True  # an occurrence after one of the same n-gram in its caption
    if not dup.any():
        return out, counts
    dc, dcol = cid[dup], col[dup]
    _, first = np.unique(dc, return_index=True)  # columns grow with position: first = min
    hist = np.bincount(dcol[first], minlength=ncols + 1)[:ncols]
    return np.cumsum(hist), counts


def _max_per_caption(cid: np.ndarray, values: np.ndarray, C: int) -> np.ndarray:
    out = np.zeros(C, np.int64)
    if values.size:
        starts = np.flatnonzero(np.r_[True, cid[1:] != cid[:-1]])
        out[cid[starts]] = np.maximum.reduceat(values, starts)
    return out


def _prefix_counts(keys_per_col: List[np.ndarray], ncols: int) -> KeyedCounts:
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
                    chunk_size: int = 50_000, merge_every: int = 8, spill_dir: Optional[str] = None,
                    max_keys: int = 8_000_000) -> SurveySummary:
    """Survey a stream of captions; the result does not depend on ``workers`` or ``chunk_size``.

    The input is consumed lazily (at most ``2 * workers`` chunks in flight) and partial
    summaries are merged every ``merge_every`` chunks, so memory is bounded by the number of
    distinct n-grams, not by the corpus.
    """
    merge = _SpillingMerge(SurveySpill(spill_dir, max_keys)) if spill_dir else SurveySummary.merge_all
    pending: List[SurveySummary] = [SurveySummary(config=config)]

    def add(part: SurveySummary) -> None:
        pending.append(part)
        if len(pending) > merge_every:
            pending[:] = [merge(pending)]

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
    return merge(pending)


def survey_surface(captions: Iterable[str], config: SurveyConfig = SurveyConfig(), workers: int = 1) -> Dict[str, object]:
    """Convenience wrapper: survey and finalize."""
    return survey_captions(captions, config, workers).finalize()


# ---------------------------------------------------------------------------------------------
# bounded memory: spilled exact counts
# ---------------------------------------------------------------------------------------------

class SurveySpill:
    """Exact keyed tables of a survey spilled to disk once they hold more than ``max_keys`` keys.

    Each table (n-grams per order, raw and content prefixes, dedup) becomes sorted,
    hash-partitioned runs (:class:`capaudit.engine.spill.SpilledCounts`); :meth:`stats` reads one
    partition at a time. Integer results (distinct counts, totals, top-k masses, dedup rates, rep,
    violations) equal the in-memory ones; float sums (entropy, HHI) are taken per partition in key
    order, and ties among the listed top-10 prefixes are broken by key rather than by first
    appearance, so those detail fields can differ from an in-memory run in the last bits / tie
    order (they are the same whatever the sharding or spill timing).
    """

    def __init__(self, directory: str, max_keys: int = 8_000_000, partitions: int = 16):
        from capaudit.engine.spill import SpillDir

        self._dir = SpillDir(directory)
        self.max_keys = int(max_keys)
        self.partitions = partitions
        self.tables: Dict[str, object] = {}
        self.spills = 0

    @property
    def path(self):
        return self._dir.path

    def close(self) -> None:
        self._dir.close()

    def _table(self, name: str, ncols: int):
        from capaudit.engine.spill import SpilledCounts

        if name not in self.tables:
            self.tables[name] = SpilledCounts(self._dir.path, name, ncols, self.partitions)
        return self.tables[name]

    def maybe_spill(self, summ: "SurveySummary", force: bool = False) -> None:
        """Move every in-memory table of ``summ`` to disk when they hold more than ``max_keys`` keys."""
        tables = summ.keyed_tables()
        if not force and sum(kc.keys.size for kc in tables.values()) <= self.max_keys:
            return
        for name, kc in tables.items():
            if kc.keys.size:
                self._table(name, kc.counts.shape[1]).spill(kc.keys, kc.counts)
        summ.clear_keyed_tables()
        self.spills += 1

    def stats(self, summ: "SurveySummary") -> Dict[str, object]:
        """Per table and column the ``column_stats`` of the in-memory path, the top-10 content
        prefixes per column and the dedup numbers, from the spilled runs."""
        self.maybe_spill(summ, force=True)
        cfg = summ.config
        ncols = summ.ncols
        kmax = max(cfg.top_ks)
        out: Dict[str, object] = {}
        for name, sc in self.tables.items():
            if name == "dedup":
                continue
            distinct = np.zeros(ncols, np.int64)
            total = np.zeros(ncols, np.int64)
            tops: List[List[np.ndarray]] = [[] for _ in range(ncols)]
            cand: List[List[Tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(ncols)]
            for keys, counts in sc.partitions_iter():
                for col in range(ncols):
                    c = counts[:, col]
                    pos = c > 0
                    cc = c[pos]
                    distinct[col] += cc.size
                    total[col] += int(cc.sum())
                    tops[col].append(np.sort(cc)[::-1][:kmax])
                    if name == "prefix_content" and cc.size:
                        kk = keys[pos]
                        order = np.lexsort((kk, -cc))[:10]
                        cand[col].append((kk[order], cc[order]))
            h = np.zeros(ncols)
            hhi = np.zeros(ncols)
            for keys, counts in sc.partitions_iter():  # second pass: needs the totals
                for col in range(ncols):
                    c = counts[:, col]
                    c = c[c > 0]
                    if c.size and total[col]:
                        p = c / total[col]
                        h[col] += float(-(p * np.log(p)).sum())
                        hhi[col] += float((p * p).sum())
            per_col = []
            for col in range(ncols):
                st: Dict[str, object] = {"distinct": int(distinct[col]), "total": int(total[col])}
                desc = np.sort(np.concatenate(tops[col]) if tops[col] else np.zeros(0, np.int64))[::-1]
                cum = np.cumsum(desc)
                tt = int(total[col])
                st["top_k_mass"] = {str(k): (float(cum[min(k, desc.size) - 1]) / tt if tt else 0.0) for k in cfg.top_ks}
                if tt:
                    st["entropy"] = float(h[col])
                    st["entropy_miller_madow"] = float(h[col]) + (int(distinct[col]) - 1) / (2 * tt)
                    st["effective_vocab"] = math.exp(st["entropy"])
                    st["effective_vocab_miller_madow"] = math.exp(st["entropy_miller_madow"])
                    st["hhi"] = float(hhi[col])
                    st["effective_simpson"] = 1.0 / st["hhi"]
                per_col.append(st)
            out[name] = per_col
            if name == "prefix_content":
                top10 = []
                for col in range(ncols):
                    if cand[col]:
                        kk = np.concatenate([a for a, _ in cand[col]])
                        cc = np.concatenate([b for _, b in cand[col]])
                        order = np.lexsort((kk, -cc))[:10]
                        top10.append([(summ.prefix_strings.get(int(kk[i]), "<unlisted>"), int(cc[i])) for i in order])
                    else:
                        top10.append([])
                out["prefix_content_top_10"] = top10
        unique = dup_mass = maxd = 0
        if "dedup" in self.tables:
            for _, counts in self.tables["dedup"].partitions_iter():
                d = counts[:, 0]
                unique += d.size
                dup_mass += int(d[d > 1].sum())
                maxd = max(maxd, int(d.max()) if d.size else 0)
        out["dedup"] = (unique, dup_mass, maxd)
        return out


# ---------------------------------------------------------------------------------------------
# sharded inputs: the engine's map (one shard) and merge
# ---------------------------------------------------------------------------------------------

def survey_shard(shard, config: SurveyConfig = SurveyConfig(), caption_field: Optional[str] = None,
                 on_missing: str = "error", chunk_size: int = 20_000, merge_every: int = 8) -> SurveySummary:
    """The survey of one input shard (:class:`capaudit.engine.Shard`): the engine's map."""
    from capaudit.engine.shards import iter_shard_captions
    from functools import partial

    from capaudit.surfaces import row_captions

    surveyor = _ChunkSurveyor(config)
    pending: List[SurveySummary] = [SurveySummary(config=config)]
    stats: Dict[str, object] = {}
    # captions as written (blank ones skipped): a caption of at most B units is its own window, kept
    # whole and unstripped, so a line-start pattern misses an indented first line (spec §2.2)
    as_written = partial(row_captions, strip=False)
    for chunk in _chunks(iter_shard_captions(shard, as_written, caption_field, on_missing, stats, strip=False),
                         chunk_size):
        pending.append(surveyor(chunk))
        if len(pending) > merge_every:
            pending[:] = [SurveySummary.merge_all(pending)]
    out = SurveySummary.merge_all(pending)
    stats["fields"] = list(stats.get("fields", {}))[:200]
    out.load = stats
    return out


def _merge_load(loads: List[Dict[str, object]]) -> Dict[str, object]:
    out: Dict[str, object] = {}
    for d in loads:
        for k, v in d.items():
            if k == "fields":
                seen = out.setdefault("fields", [])
                seen += [f for f in v if f not in seen][: max(0, 200 - len(seen))]
            else:
                out[k] = out.get(k, 0) + v
    return out


class _SpillingMerge:
    """``merge_fn`` for the engine that keeps at most ``max_keys`` keys in memory (the rest is
    spilled by :class:`SurveySpill`)."""

    def __init__(self, spill: "SurveySpill"):
        self.spill = spill

    def __call__(self, parts: List[SurveySummary]) -> SurveySummary:
        out = SurveySummary.merge_all(parts)
        out.spill = self.spill
        self.spill.maybe_spill(out)
        return out


def survey_files(inputs, config: SurveyConfig = SurveyConfig(), engine: str = "local", workers: int = 1,
                 address: Optional[str] = None, shards: Optional[int] = None, caption_field: Optional[str] = None,
                 spill_dir: Optional[str] = None, max_keys: int = 8_000_000,
                 chunk_size: int = 20_000, on_missing: str = "error") -> SurveySummary:
    """Survey JSONL / Parquet inputs (paths, folders, globs, fsspec URLs) on ``engine``.

    The inputs are cut into ``shards`` (default: one per worker locally, up to 1 GiB each; ~128 MiB
    pieces on Ray);
    each shard is surveyed where the engine runs it (``local``: this process or a pool of
    ``workers`` processes; ``ray``: tasks on the cluster at ``address`` / ``RAY_ADDRESS``, else a
    local one) and the summaries are merged in shard order, so the result does not depend on the
    engine, the workers or the shards. ``spill_dir``: keep at most ``max_keys`` keyed counts in
    memory and spill the rest there (:class:`SurveySpill`; the folder is removed by ``finalize``).
    """
    from functools import partial

    from capaudit.engine.executors import map_merge
    from capaudit.engine.shards import default_num_shards, list_shards

    # local: one shard per worker (pieces of up to 1 GiB); Ray: ~128 MiB tasks the cluster can spread
    target = (1 << 30) if engine == "local" else (128 << 20)
    n = shards if shards is not None else default_num_shards(inputs, workers, target)
    parts = list_shards(inputs, num_shards=n)
    fn = partial(survey_shard, config=config, caption_field=caption_field, on_missing=on_missing,
                 chunk_size=chunk_size)
    merge = _SpillingMerge(SurveySpill(spill_dir, max_keys)) if spill_dir else SurveySummary.merge_all
    return map_merge(parts, fn, merge, engine=engine, workers=workers, address=address)
