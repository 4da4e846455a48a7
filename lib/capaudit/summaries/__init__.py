"""Typed summary schemas: what stages write and the paper layer reads.

* :mod:`.claimed` — claimed-CBU summary JSON (reference-spec §4.4)
* :mod:`.vqa` — per-judge VQA summary JSON (§5.3)
* :mod:`.cells` — by-category VQA cells ``cbu_vqa_by_category_b64.json`` (§5.4)
* :mod:`.frontier` — budget-frontier CSV with Pareto flags (§4.4, G6)
* :mod:`.agreement` — judge–human agreement bootstrap JSON (§7, G12)
* :mod:`.prompt_support` — prompt-support TSV (§3.2; owned by the prompt stage)
* :mod:`.vqa_layout` — judges, surfaces, roles and comparisons of our own judged slices
* :mod:`.numbers_fragments` — quoted numbers written by stages, merged by the paper's numbers map
* :mod:`.categories` — the claim categories and judge answers the schemas and stages share

Every reader validates and raises ``ValueError`` naming the file and field; every writer
reproduces the reference's formatting byte for byte.
"""

from .cells import (Agreement, CellsFile, Cell, CellStats, Extraction, JudgesAgreement, MultiAgreement, PairAgreement,
                    SliceAgreement, TypeCounts, merge_cells_files, read_cells, write_cells, format_cells)
from .claimed import ClaimedSummary, ClaimedSurface, ClaimedStatus, Distribution, read_claimed_summary, write_claimed_summary, format_claimed_summary
from .frontier import FrontierRow, read_frontier_csv, write_frontier_csv, format_frontier_csv, pareto_flags, with_pareto_flags
from .agreement import AgreementInterval, JudgeAgreement, read_agreement, write_agreement, format_agreement
from .rollups import ClaimedRollupRow, read_claimed_rollup_csv, write_claimed_rollup_csv
from .vqa import VqaSummary, VqaSurface, AnswerCounts, read_vqa_summary, write_vqa_summary, format_vqa_summary
from .vqa_layout import VqaLayout, read_vqa_layout, write_vqa_layout

__all__ = [
    "Agreement", "Cell", "CellStats", "CellsFile", "Extraction", "JudgesAgreement", "MultiAgreement", "PairAgreement",
    "SliceAgreement", "TypeCounts", "merge_cells_files",
    "read_cells", "write_cells", "format_cells", "VqaLayout", "read_vqa_layout", "write_vqa_layout",
    "ClaimedStatus", "ClaimedSummary", "ClaimedSurface", "Distribution",
    "read_claimed_summary", "write_claimed_summary", "format_claimed_summary",
    "FrontierRow", "read_frontier_csv", "write_frontier_csv", "format_frontier_csv", "pareto_flags", "with_pareto_flags",
    "AgreementInterval", "JudgeAgreement", "read_agreement", "write_agreement", "format_agreement",
    "ClaimedRollupRow", "read_claimed_rollup_csv", "write_claimed_rollup_csv",
    "AnswerCounts", "VqaSummary", "VqaSurface", "read_vqa_summary", "write_vqa_summary", "format_vqa_summary",
]
