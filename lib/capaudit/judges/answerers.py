"""Who answered a judge: its spec as the recorded model cards say (never as its name suggests).

A judge of the params file is a name, a model and an endpoint. What answered is what the client
recorded beside the judge's response stores (:func:`capaudit.llm.store.answered_by`): a stand-in
(the offline judges of ``capaudit serve``, the random-vision test VLM, a server that declared
nothing) is named by its card's label in every table and marked offline, whatever the params
called it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from capaudit.llm.cards import any_stand_in, card_kinds, cards_label
from capaudit.llm.store import answered_by

from .stage_params import JudgeSpec


def recorded_cards(stores: Sequence[Path]) -> List[Dict[str, Any]]:
    """The distinct model cards recorded for ``stores`` (in store order)."""
    out: List[Dict[str, Any]] = []
    for s in stores:
        out += [c for c in answered_by(s) if c not in out]
    return out


def as_answered(judge: JudgeSpec, stores: Sequence[Path]) -> Tuple[JudgeSpec, List[str]]:
    """``judge`` with the label and offline flag its recorded cards give, and the cards' kinds
    (``[]`` and the spec as given when nothing was recorded)."""
    cards = recorded_cards(stores)
    if not cards:
        return judge, []
    stand_in = any_stand_in(cards)
    label = cards_label(cards, judge.label) if stand_in else judge.label
    return replace(judge, label=label, offline=stand_in), card_kinds(cards)


__all__ = ["as_answered", "recorded_cards"]
