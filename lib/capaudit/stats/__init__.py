"""Resampling and agreement statistics shared by every stage (reference-spec §5.4, §7)."""

from .agreement import (
    BinaryAgreement,
    JudgeHumanRecord,
    NominalAgreement,
    binary_agreement,
    cohen_kappa,
    confusion_matrix,
    consensus,
    exact_agreement,
    gwet_ac1,
    judge_human_agreement,
    nominal_agreement,
    symmetrized_pairs,
    two_rater_report,
)
from .bootstrap import (
    BootstrapStd,
    ClusterBootstrap,
    caption_bootstrap,
    cluster_bootstrap,
    percentile,
    weighted_nominal_agreement,
)

__all__ = [
    "BinaryAgreement",
    "BootstrapStd",
    "ClusterBootstrap",
    "JudgeHumanRecord",
    "NominalAgreement",
    "binary_agreement",
    "caption_bootstrap",
    "cluster_bootstrap",
    "cohen_kappa",
    "confusion_matrix",
    "consensus",
    "exact_agreement",
    "gwet_ac1",
    "judge_human_agreement",
    "nominal_agreement",
    "percentile",
    "symmetrized_pairs",
    "two_rater_report",
    "weighted_nominal_agreement",
]
