"""The base of every stage's typed ``run()`` result."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Dict, Iterator


@dataclass(frozen=True)
class StageResult:
    """A frozen stage result; ``result["table"]`` reads the field ``table`` (notebooks index results
    by name), :meth:`to_dict` gives every field by name."""

    def __getitem__(self, name: str) -> Any:
        if name not in self.keys():
            raise KeyError(name)
        return getattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self) -> tuple:
        return tuple(f.name for f in fields(self))

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in self.keys() else default

    def to_dict(self) -> Dict[str, Any]:
        """The fields by name, shallow (values are not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


__all__ = ["StageResult"]
