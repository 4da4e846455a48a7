"""The ``text_stats:`` params section (and ``capaudit text-stats`` options) as one frozen value."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from ..config import ParamsSection, PathLike
from ..engine.executors import ENGINE_KEYS, EngineParams
from .survey import SurveyConfig

SECTION = "text_stats"


def headline_k(ks: Tuple[int, ...]) -> int:
    """The k of ``prefix_top_mass`` among the asked ``ks``: 100 (the reference's) when listed, else the first."""
    return 100 if 100 in ks else int(ks[0])


@dataclass(frozen=True)
class TextStatsParams:
    """Settings of the text-budget survey; the survey's own defaults (:class:`SurveyConfig`) are its defaults."""

    budgets: Tuple[int, ...] = SurveyConfig.budgets
    ngram_orders: Tuple[int, ...] = SurveyConfig.ngram_orders
    repeat_orders: Tuple[int, ...] = SurveyConfig.repeat_orders
    top_k: Tuple[int, ...] = (SurveyConfig.top_k,)  # the ks asked; prefix_top_mass uses headline_k
    marginal_gain_from_rounded: bool = SurveyConfig.marginal_gain_from_rounded
    distinct: str = SurveyConfig.distinct
    hll_precision: int = SurveyConfig.hll_precision
    engine: EngineParams = EngineParams()
    spill_dir: Optional[str] = None
    max_keys: int = 8_000_000
    max_records: Optional[int] = None  # surveyed rows per surface (the first N read; None: all)
    surfaces: Optional[Tuple[str, ...]] = None  # None: every surface of the run
    slices: Optional[Tuple[str, ...]] = None  # None: every fair slice of the run

    KEYS = ("budgets", "ngram_orders", "repeat_orders", "top_k", "marginal_gain_from_rounded", "distinct",
            "hll_precision", "spill_dir", "max_keys", "max_records", "surfaces", "slices") + ENGINE_KEYS

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "TextStatsParams":
        """From the params section; an unknown key or a bad value names the file, section and key."""
        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        top_k = s.raw("top_k", cls.top_k)
        ks = top_k if isinstance(top_k, (list, tuple)) and top_k else [top_k]
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
            raise s.error("top_k", f"expected a positive integer or a list of them, got {top_k!r}")
        spill = s.raw("spill_dir")
        return cls(budgets=tuple(sorted(set(s.ints("budgets", cls.budgets)))),
                   ngram_orders=s.ints("ngram_orders", cls.ngram_orders),
                   repeat_orders=s.ints("repeat_orders", cls.repeat_orders), top_k=tuple(ks),
                   marginal_gain_from_rounded=s.boolean("marginal_gain_from_rounded", cls.marginal_gain_from_rounded),
                   distinct=s.text("distinct", cls.distinct, ("exact", "hll")),
                   hll_precision=s.integer("hll_precision", cls.hll_precision, 4),
                   engine=EngineParams.from_section(s), spill_dir=None if spill is None else str(spill),
                   max_keys=s.integer("max_keys", cls.max_keys), max_records=s.integer("max_records", None),
                   surfaces=s.names("surfaces", None),
                   slices=s.names("slices", None))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "TextStatsParams":
        """From the ``capaudit text-stats`` options (:func:`capaudit.text.cli.register`)."""
        return cls(budgets=tuple(sorted(set(args.budgets))), ngram_orders=tuple(args.ngram_orders),
                   repeat_orders=tuple(args.repeat_orders), top_k=tuple(args.top_k),
                   marginal_gain_from_rounded=args.rounded_marginal_gain, distinct=args.distinct,
                   hll_precision=args.hll_precision, engine=EngineParams.from_args(args), spill_dir=args.spill_dir,
                   max_keys=args.max_keys)

    def survey_config(self) -> SurveyConfig:
        """The :class:`SurveyConfig` these settings give (``top_ks`` always has 10, 100 and 1000)."""
        return SurveyConfig(budgets=self.budgets, ngram_orders=self.ngram_orders, repeat_orders=self.repeat_orders,
                            top_k=headline_k(self.top_k), top_ks=tuple(sorted(set(self.top_k) | {10, 100, 1000})),
                            marginal_gain_from_rounded=self.marginal_gain_from_rounded, distinct=self.distinct,
                            hll_precision=self.hll_precision)


__all__ = ["SECTION", "TextStatsParams", "headline_k"]
