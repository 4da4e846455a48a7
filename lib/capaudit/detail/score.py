"""Detailness scoring of caption records: graph → grounding → ICR, AOD, CD (+ optional ITM).

:func:`score_records` scores :class:`CaptionRecord` s with a scene-graph parser, a grounding
backend (or ``None``: every ICR unavailable) and an optional ITM scorer, in input order and in
chunks (memory independent of the input size). One output row per caption::

    {<other input fields>, id, image, caption, icr, aod, cd, cd_unnormalized, objects, attributes,
     relations, length, length_unit, relation_ends, icr_status, icr_kind, parser, grounding,
     scene_graph, [itm, itm_scorer], [graph_error]}

``objects`` / ``attributes`` / ``relations`` are |O(c)|, |A(c)|, |R(c)|; ``scene_graph`` is the
graph itself; ``icr_status`` is ``ok``, ``unavailable`` (no grounding source: ``icr`` and ``cd``
null) or ``parse_failed`` (the parser gave no graph: every score null, ``graph_error`` says why);
``icr_kind`` names which ICR the grounding gave (``things-only`` for COCO instance masks,
``things+stuff``, ``segmentation-model``; null without one); ``relation_ends`` the AOD/CD relation
count (:data:`~capaudit.detail.metrics.RELATION_ENDS`).
Input fields named like an output field are overwritten. :func:`score_file` is
``capaudit detail score``: JSONL in, JSONL out (atomic) plus ``OUT.manifest.json`` (last).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from capaudit.errors import EmptyInputError, FieldNotFoundError, InputError
from capaudit.io.atomic import atomic_path, write_json_atomic

from .metrics import DEFAULT_LENGTH_UNIT, DEFAULT_RELATION_ENDS, LENGTH_UNITS, RELATION_ENDS, score_graph

CHUNK = 512


@dataclass(frozen=True)
class CaptionRecord:
    """One caption with its image reference; ``extra`` = the other input fields."""

    id: str
    image: Any
    caption: str
    line: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)


class RecordReader:
    """The row rules of :func:`read_caption_records`, one row at a time (the engine's shards use them
    too, so a sharded run accepts and rejects exactly the same rows).

    :meth:`record` turns a row into a :class:`CaptionRecord` (``None``: skipped or missing caption)
    and raises per-row errors at once; :meth:`finish` raises what needs the whole input: a field no
    row has, then the first row without the caption field, then "no caption rows". ``line`` may be
    an int or a callable giving it (resolved only for an error)."""

    def __init__(self, caption_field: str = "caption", image_field: str = "image", id_field: Optional[str] = "id",
                 skip_empty: bool = False):
        self.caption_field, self.image_field, self.id_field = caption_field, image_field, id_field
        self.skip_empty = skip_empty
        self.has: Dict[str, bool] = {caption_field: False, image_field: False,
                                     **({id_field: False} if id_field else {})}
        self.seen_fields: set = set()
        self.first_missing: Any = None
        self.records = 0

    def record(self, row: Mapping[str, Any], n: int, path: Any, line: Any) -> Optional[CaptionRecord]:
        """The record of row ``n`` (0-based, for ``row<N>`` ids) at ``path``/``line``."""
        caption_field, id_field = self.caption_field, self.id_field
        self.seen_fields.update(row)
        for f in self.has:
            self.has[f] = self.has[f] or f in row
        cap = row.get(caption_field)
        if caption_field in row and (not isinstance(cap, str) or not cap.strip()):
            if self.skip_empty:
                return None
            raise InputError("caption must be a non-empty string", path=path, line=_line(line), field=caption_field)
        if caption_field not in row:
            if not self.skip_empty and self.first_missing is None:
                self.first_missing = (path, line)
            return None
        if id_field:
            raw = row.get(id_field)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                raise InputError("id is missing or empty", path=path, line=_line(line), field=id_field)
            cid = str(raw)
        else:
            cid = f"row{n}"
        extra = {k: v for k, v in row.items() if k not in (caption_field, self.image_field, id_field)}
        self.records += 1
        return CaptionRecord(cid, row.get(self.image_field), cap, line if isinstance(line, int) else 0, extra)

    def finish(self, path: Any) -> None:
        """Raise the whole-input errors (class docstring); ``path`` names the input."""
        for f, ok in self.has.items():
            if not ok and self.seen_fields:
                raise FieldNotFoundError(f, sorted(self.seen_fields), path=path)
        if self.first_missing is not None:
            where, line = self.first_missing
            raise InputError("caption field is missing", path=where, line=_line(line), field=self.caption_field)
        if not self.records:
            raise EmptyInputError("no caption rows", path=path)


def _line(line: Any) -> Optional[int]:
    return line() if callable(line) else line


def read_caption_records(path: Union[str, Path], caption_field: str = "caption", image_field: str = "image",
                         id_field: Optional[str] = "id", skip_empty: bool = False) -> List[CaptionRecord]:
    """Caption records of a JSONL file; errors name file, line and field.

    A caption must be a non-empty string (``skip_empty``: rows without one are skipped instead,
    e.g. another stage's failed captions); the id field (if named) must be present and non-empty
    (without one, ids are ``row<N>``, N the 0-based row); a row without the image field has no image
    (ICR unavailable); a field that no row has is an error (a typo is not silently "no image")."""
    from capaudit.surfaces.readers import iter_json_lines

    path = Path(path)
    if not path.is_file():
        raise InputError("caption file not found", path=path)
    out: List[CaptionRecord] = []
    reader = RecordReader(caption_field, image_field, id_field, skip_empty)
    try:
        for n, (lineno, row) in enumerate(iter_json_lines(path)):
            rec = reader.record(row, n, path, lineno)
            if rec is not None:
                out.append(rec)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc)) from None
    reader.finish(path)
    return out


def _chunks(items: Sequence[Any], n: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def score_records(records: Sequence[CaptionRecord], parser: Any, grounding: Any = None, itm: Any = None,
                  relation_ends: str = DEFAULT_RELATION_ENDS, length_unit: str = DEFAULT_LENGTH_UNIT,
                  chunk: int = CHUNK) -> Iterator[Dict[str, Any]]:
    """Score rows (module docstring), in input order."""
    if relation_ends not in RELATION_ENDS:
        raise InputError(f"relation_ends must be one of {RELATION_ENDS}", field="relation_ends")
    if length_unit not in LENGTH_UNITS:
        raise InputError(f"length unit must be one of {LENGTH_UNITS}", field="length_unit")
    g_name = grounding.name if grounding is not None else "none"
    for part in _chunks(records, chunk):
        results = parser.parse_many([r.caption for r in part], [r.id for r in part])
        graphs = [res.graph for res in results]
        itm_scores = itm.score([r.image for r in part], [r.caption for r in part], graphs) if itm is not None \
            else [None] * len(part)
        for rec, res, s_itm in zip(part, results, itm_scores):
            row: Dict[str, Any] = dict(rec.extra)
            row.update({"id": rec.id, "image": rec.image, "caption": rec.caption})
            if res.graph is None:
                row.update({"icr": None, "aod": None, "cd": None, "cd_unnormalized": None, "objects": None,
                            "attributes": None, "relations": None, "length": None, "icr_status": "parse_failed",
                            "icr_kind": None, "graph_error": res.error})
            else:
                grounded = grounding.ground(rec.image) if grounding is not None else None
                row.update(score_graph(res.graph, rec.caption, grounded, relation_ends, length_unit).to_dict())
                row["icr_kind"] = grounded.icr_kind if grounded is not None else None
            row.update({"length_unit": length_unit, "relation_ends": relation_ends, "parser": parser.name,
                        "grounding": g_name,
                        "scene_graph": res.graph.to_json() if res.graph is not None else None})
            if itm is not None:
                row["itm"] = s_itm
                row["itm_scorer"] = itm.name
            yield row


def score_file(input_path: Union[str, Path], out: Union[str, Path], parser: Any, grounding: Any = None,
               itm: Any = None, caption_field: str = "caption", image_field: str = "image",
               id_field: Optional[str] = "id", relation_ends: str = DEFAULT_RELATION_ENDS,
               length_unit: str = DEFAULT_LENGTH_UNIT) -> Dict[str, Any]:
    """``capaudit detail score``: write the score rows of a caption JSONL and its manifest; returns
    the manifest (counts and backends)."""
    import json

    t0 = time.monotonic()
    records = read_caption_records(input_path, caption_field, image_field, id_field)
    counts = {"rows": 0, "icr_ok": 0, "icr_unavailable": 0, "parse_failed": 0}
    out = Path(out)
    with atomic_path(out) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in score_records(records, parser, grounding, itm, relation_ends, length_unit):
                counts["rows"] += 1
                key = {"ok": "icr_ok", "unavailable": "icr_unavailable", "parse_failed": "parse_failed"}[row["icr_status"]]
                counts[key] += 1
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    manifest = {
        "command": "capaudit detail score", "input": str(input_path), "output": out.name,
        "fields": {"caption": caption_field, "image": image_field, "id": id_field},
        "parser": {"name": parser.name, "label": getattr(parser, "label", parser.name),
                   "version": getattr(parser, "version", None) or getattr(parser, "revision", None)},
        "grounding": grounding_info(grounding),
        "itm": {"name": itm.name, "label": itm.label} if itm is not None else None,
        **definitions(grounding, relation_ends), "length_unit": length_unit, "counts": counts,
        "elapsed_sec": round(time.monotonic() - t0, 3),
    }
    write_json_atomic(manifest_path(out), manifest)
    return manifest


def grounding_info(grounding: Any) -> Optional[Dict[str, Any]]:
    """The manifest's ``grounding`` entry: name, label, ``icr_kind`` and its printed ICR name."""
    from .grounding import icr_name

    if grounding is None:
        return None
    kind = getattr(grounding, "icr_kind", None)
    return {"name": grounding.name, "label": grounding.label, "icr_kind": kind, "icr": icr_name([kind])}


def definitions(grounding: Any, relation_ends: str) -> Dict[str, Any]:
    """``relation_ends`` and its printed name, and the ICR the grounding gives (manifests)."""
    from .grounding import icr_name
    from .metrics import relation_ends_label

    return {"relation_ends": relation_ends, "relation_ends_label": relation_ends_label(relation_ends),
            "icr": icr_name([getattr(grounding, "icr_kind", None)] if grounding is not None else [])}


def manifest_path(out: Union[str, Path]) -> Path:
    """``SCORES.jsonl`` → ``SCORES.manifest.json``."""
    p = Path(out)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".manifest.json")


def read_score_rows(path: Union[str, Path]) -> List[Dict[str, Any]]:
    """Rows of a scores JSONL (errors name file and line)."""
    from capaudit.surfaces.readers import iter_json_lines

    path = Path(path)
    if not path.is_file():
        raise InputError("scores file not found", path=path)
    try:
        rows = [row for _, row in iter_json_lines(path)]
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc)) from None
    if not rows:
        raise EmptyInputError("no score rows", path=path)
    return rows


def records_from_rows(rows: Iterable[Mapping[str, Any]]) -> List[CaptionRecord]:
    """Records from in-memory rows with ``id``, ``image``, ``caption`` (the stage's surfaces)."""
    return [CaptionRecord(str(r["id"]), r.get("image"), str(r["caption"]), i + 1,
                          {k: v for k, v in r.items() if k not in ("id", "image", "caption")})
            for i, r in enumerate(rows)]


__all__ = ["CaptionRecord", "RecordReader", "read_caption_records", "score_records", "score_file", "grounding_info",
           "definitions", "manifest_path",
           "read_score_rows", "records_from_rows"]
