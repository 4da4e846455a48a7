"""Resampling, agreement and judge-calibration statistics shared by every stage (reference-spec §5.4, §7)."""

from . import agreement as _agreement
from .agreement import *  # noqa: F401,F403  (the names in agreement.__all__)
from .bootstrap import (BootstrapStd, ClusterBootstrap, caption_bootstrap, cluster_bootstrap, percentile,
                        weighted_nominal_agreement)
from .calibration import (CoverageRow, Interval, coverage_study, human_only_mean, judge_only_mean, ppi_mean,
                          weighted_ppi_mean)

__all__ = [*_agreement.__all__, "BootstrapStd", "ClusterBootstrap", "caption_bootstrap", "cluster_bootstrap",
           "percentile", "weighted_nominal_agreement", "CoverageRow", "Interval", "coverage_study", "human_only_mean",
           "judge_only_mean", "ppi_mean", "weighted_ppi_mean"]
