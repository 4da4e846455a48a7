"""The text budgets every stage shares (spec §1.2), defined here and nowhere else.

``DEFAULT_BUDGET`` is the main window B (the paper's B = 64); ``DEFAULT_BUDGETS`` the survey's
budget list (``text_stats.budgets``, ``capaudit text-stats --budgets``); ``SENSITIVITY_BUDGETS``
the prompt-support sensitivity sweep (``None`` = the full caption).
"""

from __future__ import annotations

from typing import Optional, Tuple

DEFAULT_BUDGET: int = 64
DEFAULT_BUDGETS: Tuple[int, ...] = (16, 32, DEFAULT_BUDGET, 128, 256)
SENSITIVITY_BUDGETS: Tuple[Optional[int], ...] = (DEFAULT_BUDGET, 128, None)

__all__ = ["DEFAULT_BUDGET", "DEFAULT_BUDGETS", "SENSITIVITY_BUDGETS"]
