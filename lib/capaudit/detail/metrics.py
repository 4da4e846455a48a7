"""Detailness metrics of a caption c for an image x (issue 13, "The method").

* **ICR** (Eq. 2): ``ICR(x, c) = |∪_{o ∈ O(c)} M(o)| / (W·H)`` — the area of the union of the
  masks of all objects mentioned in c over the image area; each pixel counts once (overlapping
  masks, an object named twice, two names of one category). ``None`` (*unavailable*, never 0)
  when the image has no grounding source.
* **AOD** (Eq. 4): ``AOD(x, c) = Σ_j (D_R(o_j) + D_A(o_j)) / |O(c)|`` — relations and attributes
  per object. ``D_A(o)`` = attributes attached to o. ``D_R(o)`` depends on the named option
  :data:`RELATION_ENDS` (how a relation between two objects counts for each end):

  - ``subject`` (**default**, the method's Eq. 3): a relation counts once, for its subject, so
    ``Σ_j D_R(o_j) = |R(c)|``;
  - ``both`` (the "edges connected to a node" reading): it counts 1 for its subject and 1 for its
    object, so ``D_R(o)`` is the degree of o in the relation graph and ``Σ_j D_R(o_j) = 2|R(c)|``;
  - ``split``: it counts ½ for each end (``Σ = |R(c)|``).

  The choice travels into every output that AOD or CD feeds (score rows' ``relation_ends``,
  manifests, table notes, the paper): :func:`relation_ends_label` is its printed name.
  A caption with no object has AOD 0 (it details no object), not an undefined value.
* **CD** (Eq. 5): ``CD(x, c) = ICR(x, c) · AOD(x, c) / Length(c)`` with the same AOD (so the same
  ``relation_ends``); ``Length`` in lexical units
  (:func:`capaudit.text.lexical.lex_count`, **default**) or whitespace words (``length_unit=
  "words"``). ``normalize_length=False`` gives ``ICR · AOD`` (the "CD without length
  normalisation" ablation). ``None`` when ICR is unavailable or the length is 0.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, Optional

from capaudit.text.lexical import lex_count

from .graph import SceneGraph

RELATION_ENDS = ("subject", "both", "split")
DEFAULT_RELATION_ENDS = "subject"
#: the printed name of each relation count (table notes, summaries, the paper)
RELATION_ENDS_LABELS = {
    "subject": "subject (Eq. 3: a relation counts once, for its subject)",
    "both": "both (a relation counts once at each end: edges connected to a node)",
    "split": "split (a relation counts 1/2 at each end)",
}
LENGTH_UNITS = ("lex", "words")
DEFAULT_LENGTH_UNIT = "lex"


def caption_length(text: str, unit: str = DEFAULT_LENGTH_UNIT) -> int:
    """Length(c) of Eq. 5: lexical units (``lex``, default) or whitespace words (``words``)."""
    if unit == "lex":
        return lex_count(text)
    if unit == "words":
        return len(text.split())
    raise ValueError(f"length unit must be one of {LENGTH_UNITS}, got {unit!r}")


def relation_ends_label(relation_ends: str) -> str:
    """The printed name of a :data:`RELATION_ENDS` value (``ValueError`` for another value)."""
    if relation_ends not in RELATION_ENDS_LABELS:
        raise ValueError(f"relation_ends must be one of {RELATION_ENDS}, got {relation_ends!r}")
    return RELATION_ENDS_LABELS[relation_ends]


def icr(graph: SceneGraph, grounded: Any, names: Optional[Iterable[str]] = None) -> Optional[float]:
    """Image coverage rate, Eq. 2: union mask area of the objects of ``graph`` / image area.

    ``grounded``: a :class:`~capaudit.detail.grounding.GroundedImage` or ``None`` (no grounding
    source → ``None``). ``names`` overrides the object names (subgraph sampling)."""
    if grounded is None:
        return None
    area = int(grounded.width) * int(grounded.height)
    if area <= 0:
        raise ValueError("image area must be positive")
    return grounded.union_area(graph.objects if names is None else names) / area


def object_detail(graph: SceneGraph, relation_ends: str = DEFAULT_RELATION_ENDS) -> list:
    """``D_R(o_j) + D_A(o_j)`` for every object (Eq. 4 terms; see :data:`RELATION_ENDS`)."""
    if relation_ends not in RELATION_ENDS:
        raise ValueError(f"relation_ends must be one of {RELATION_ENDS}, got {relation_ends!r}")
    d = [0.0] * graph.n_objects
    for a in graph.attributes:
        d[a.object] += 1.0
    for r in graph.relations:
        if relation_ends == "both":
            d[r.subject] += 1.0
            d[r.object] += 1.0
        elif relation_ends == "subject":
            d[r.subject] += 1.0
        else:
            d[r.subject] += 0.5
            d[r.object] += 0.5
    return d


def aod(graph: SceneGraph, relation_ends: str = DEFAULT_RELATION_ENDS) -> float:
    """Average object detailness, Eq. 4: ``Σ_j (D_R(o_j) + D_A(o_j)) / |O(c)|`` (0 without objects)."""
    d = object_detail(graph, relation_ends)
    return sum(d) / len(d) if d else 0.0


def cd(icr_value: Optional[float], aod_value: float, length: int, normalize_length: bool = True) -> Optional[float]:
    """Caption detailness, Eq. 5: ``ICR · AOD / Length(c)`` (``ICR · AOD`` without normalisation)."""
    if icr_value is None:
        return None
    if not normalize_length:
        return icr_value * aod_value
    if length <= 0:
        return None
    return icr_value * aod_value / length


@dataclass(frozen=True)
class DetailScore:
    """The score row of one caption (the ``capaudit detail score`` fields)."""

    icr: Optional[float]
    aod: float
    cd: Optional[float]
    cd_unnormalized: Optional[float]
    objects: int
    attributes: int
    relations: int
    length: int
    icr_status: str

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def score_graph(graph: SceneGraph, text: str, grounded: Any, relation_ends: str = DEFAULT_RELATION_ENDS,
                length_unit: str = DEFAULT_LENGTH_UNIT) -> DetailScore:
    """ICR (Eq. 2), AOD (Eq. 4) and CD (Eq. 5) of one caption with its graph and grounded image."""
    i = icr(graph, grounded)
    a = aod(graph, relation_ends)
    n = caption_length(text, length_unit)
    return DetailScore(icr=i, aod=a, cd=cd(i, a, n), cd_unnormalized=cd(i, a, n, normalize_length=False),
                       objects=graph.n_objects, attributes=graph.n_attributes, relations=graph.n_relations,
                       length=n, icr_status="ok" if i is not None else "unavailable")


__all__ = ["RELATION_ENDS", "DEFAULT_RELATION_ENDS", "RELATION_ENDS_LABELS", "relation_ends_label", "LENGTH_UNITS", "DEFAULT_LENGTH_UNIT", "caption_length", "icr",
           "object_detail", "aod", "cd", "DetailScore", "score_graph"]
