"""Resampling statistics shared by every stage (reference-spec §5.4, §7)."""

from .bootstrap import (
    BootstrapStd,
    ClusterBootstrap,
    caption_bootstrap,
    cluster_bootstrap,
    percentile,
    weighted_nominal_agreement,
)

__all__ = [
    "BootstrapStd",
    "ClusterBootstrap",
    "caption_bootstrap",
    "cluster_bootstrap",
    "percentile",
    "weighted_nominal_agreement",
]
