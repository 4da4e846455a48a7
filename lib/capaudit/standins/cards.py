"""The model cards of the stand-ins (``cards.yaml`` beside this file), one per served name."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Dict

import yaml

from capaudit.llm.cards import ModelCard

CARDS_FILE = Path(__file__).with_name("cards.yaml")


@lru_cache(maxsize=1)
def cards() -> Dict[str, ModelCard]:
    """Name → model card of every stand-in."""
    data = yaml.safe_load(CARDS_FILE.read_text(encoding="utf-8")) or {}
    return {str(name): ModelCard.from_json(str(name), body) for name, body in data.items()}


def card(name: str) -> ModelCard:
    """The card of the stand-in ``name`` (``KeyError`` naming the known ones)."""
    try:
        return cards()[name]
    except KeyError:
        raise KeyError(f"no model card for {name!r} in {CARDS_FILE} (known: {', '.join(sorted(cards()))})") from None


__all__ = ["CARDS_FILE", "card", "cards"]
