"""Params files → typed run configuration; run directories.

A params file is YAML with a top-level ``run`` name (defaults to the file stem), a
``notebooks`` list (the stages and paper elements this run executes, in order) and one
section per stage (``surfaces``, ``text_stats``, ``prompt_support``, ``paper``, ...).
Stages read their own section with :meth:`RunConfig.section`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from .errors import InputError

PathLike = Union[str, Path]


@dataclass(frozen=True)
class RunConfig:
    """A loaded params file."""

    path: Path
    run: str
    notebooks: List[str]
    raw: Dict[str, Any] = field(repr=False)
    out_root: Path = Path("outputs")

    @property
    def out_dir(self) -> Path:
        return self.out_root / self.run

    def section(self, name: str, required: bool = True) -> Dict[str, Any]:
        value = self.raw.get(name)
        if value is None:
            if required:
                raise KeyError(f"{self.path}: params section '{name}' is missing")
            return {}
        if not isinstance(value, dict):
            raise ValueError(f"{self.path}: params section '{name}' must be a mapping")
        return value

    def dirs(self) -> Dict[str, Path]:
        """Create and return the run's output folders."""
        out = {k: self.out_dir / k for k in ("artifacts", "tables", "figures", "notebooks")}
        for p in out.values():
            p.mkdir(parents=True, exist_ok=True)
        return out


def load_config(path: PathLike, out_root: Optional[PathLike] = None) -> RunConfig:
    """Read a params file; ``run`` defaults to the file's stem (``params/demo.yaml`` → demo)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a params file must be a mapping")
    notebooks = raw.get("notebooks", [])
    if not isinstance(notebooks, list) or not all(isinstance(n, str) for n in notebooks):
        raise ValueError(f"{path}: 'notebooks' must be a list of notebook names")
    return RunConfig(
        path=path,
        run=str(raw.get("run", path.stem)),
        notebooks=notebooks,
        raw=raw,
        out_root=Path(out_root) if out_root else Path(raw.get("out_root", "outputs")),
    )


_REQUIRED = object()


@dataclass(frozen=True)
class ParamsSection:
    """One params section read as typed values for a stage's params class (``from_section``).

    An unknown key (:meth:`only`) or a value of the wrong type is one :class:`InputError` line
    naming the params file, the section and the key (``params/x.yaml: text_stats.top_k: ...``).
    Defaults are passed in by the params class: they live there, not here.
    """

    values: Mapping[str, Any]
    name: str
    path: Optional[Path] = None

    @classmethod
    def of(cls, values: Optional[Mapping[str, Any]], name: str, path: Optional[PathLike] = None) -> "ParamsSection":
        if values is not None and not isinstance(values, Mapping):
            raise InputError(f"params section '{name}' must be a mapping", path=path)
        return cls(values or {}, name, Path(path) if path is not None else None)

    def error(self, key: str, message: str) -> InputError:
        """``<params file>: <section>.<key>: <message>`` as an :class:`InputError`."""
        return InputError(f"{self.name}.{key}: {message}" if key else f"{self.name}: {message}", path=self.path)

    def sub(self, key: str) -> "ParamsSection":
        """The mapping under ``key`` as a section of its own (``prompt_support.pools``); absent = empty."""
        value = self.values.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping, got {value!r}")
        return ParamsSection(value or {}, f"{self.name}.{key}", self.path)

    def only(self, known: Iterable[str]) -> "ParamsSection":
        """Refuse a key not in ``known`` (the first one, with the known keys listed)."""
        known = set(known)
        for key in self.values:
            if key not in known:
                raise self.error(str(key), f"unknown key (known: {', '.join(sorted(known))})")
        return self

    def has(self, key: str) -> bool:
        return self.values.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as written (for structures a stage validates itself)."""
        return self.values.get(key, default)

    def _value(self, key: str, default: Any) -> Any:
        if key not in self.values and default is _REQUIRED:
            raise self.error(key, "is required")
        return self.values.get(key, None if default is _REQUIRED else default)

    def integer(self, key: str, default: Any = _REQUIRED, minimum: Optional[int] = 1) -> Any:
        """An integer >= ``minimum``; ``None`` stays ``None`` (an optional setting)."""
        value = self._value(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            raise self.error(key, f"expected an integer >= {minimum}, got {value!r}" if minimum is not None
                             else f"expected an integer, got {value!r}")
        return value

    def number(self, key: str, default: Any = _REQUIRED, minimum: Optional[float] = None) -> Any:
        """A number (int or float, returned as float) >= ``minimum``; ``None`` stays ``None``."""
        value = self._value(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (minimum is not None and value < minimum):
            raise self.error(key, f"expected a number >= {minimum}, got {value!r}" if minimum is not None
                             else f"expected a number, got {value!r}")
        return float(value)

    def boolean(self, key: str, default: Any = _REQUIRED) -> bool:
        value = self._value(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def text(self, key: str, default: Any = _REQUIRED, choices: Optional[Sequence[str]] = None) -> Any:
        """A string (one of ``choices`` if given); numbers are taken as their text; ``None`` stays ``None``."""
        value = self._value(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(key, f"expected a string, got {value!r}")
        value = str(value)
        if choices is not None and value not in choices:
            raise self.error(key, f"one of {', '.join(choices)}, got {value!r}")
        return value

    def ints(self, key: str, default: Any = _REQUIRED, minimum: int = 1) -> Tuple[int, ...]:
        """A non-empty list of integers >= ``minimum``, as a tuple."""
        value = self._value(key, default)
        if not isinstance(value, (list, tuple)) or not value or \
                any(isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in value):
            raise self.error(key, f"expected a non-empty list of positive integers, got {value!r}")
        return tuple(value)

    def names(self, key: str, default: Any = _REQUIRED) -> Any:
        """A list of strings, as a tuple; ``None`` stays ``None``."""
        value = self._value(key, default)
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or any(not isinstance(v, str) for v in value):
            raise self.error(key, f"expected a list of names, got {value!r}")
        return tuple(value)

    def mapping(self, key: str, default: Any = _REQUIRED) -> Dict[str, Any]:
        value = self._value(key, default)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping, got {value!r}")
        return dict(value)
