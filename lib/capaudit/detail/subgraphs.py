"""Controlled subgraphs: the data generator of the method's ICR/AOD-ratio experiment (issue 13).

:func:`sample_subgraph` draws, with a seed, a subgraph of a caption's scene graph whose ICR (Eq. 2)
or AOD (Eq. 4) is a given fraction of the full graph's, within a tolerance
(``|value(sub) / value(full) − fraction| ≤ tolerance``; defaults 20/40/60/80 % ± 5 %). The draw is
**uniform over all subgraphs that meet the target**:

* ``measure="icr"``: subgraphs are object subsets (with the attributes of kept objects and the
  relations between kept objects). Coverage depends only on which grounded categories are kept,
  so feasible category sets are enumerated exactly (up to :data:`MAX_ENUMERATED_CATEGORIES`
  categories; beyond that, random category subsets are tried), one is drawn with probability
  proportional to the number of object subsets that realise it, then the objects are drawn
  uniformly among those (objects that ground nothing are kept with probability ½).
* ``measure="aod"``: every object is kept (|O| and ICR stay fixed) and a subset of the detail
  items is kept — attributes weigh 1, relations the weight of the :data:`~.metrics.RELATION_ENDS`
  option (2 for ``both``) — with the feasible ``(attributes, relations)`` counts drawn in
  proportion to their number of subsets.

No subgraph meets a target when, e.g., one object holds all the coverage: the result is then
``None`` (recorded as *unreachable*, never a silently wider tolerance). Seeds are derived per
``(seed, caption id, measure, fraction)`` with blake2b, so a caption's draw does not depend on
the order of the others.

Realisation as captions: :class:`TemplateRealiser` (``capaudit-template-realiser``, a **template
baseline**: "A white refrigerator and a woman standing. The woman at the table.") or a model
through the model-call layer (:func:`build_realise_request` + :func:`realise_with_model`, task
``detail_realise``); the realiser's name is stored with every realised caption.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.io.canonical_json import canonical

from .graph import SceneGraph
from .metrics import DEFAULT_RELATION_ENDS, RELATION_ENDS, aod

FRACTIONS = (0.2, 0.4, 0.6, 0.8)
TOLERANCE = 0.05
MEASURES = ("icr", "aod")
MAX_ENUMERATED_CATEGORIES = 14
RANDOM_TRIES = 4096
REALISER_NAME = "capaudit-template-realiser"
REALISER_LABEL = "capaudit-template-realiser (template baseline)"
REALISE_TASK = "detail_realise"
REALISE_TASK_VERSION = 1
REALISE_PROMPT_VERSION = "capaudit-realise-v1"


def derived_seed(seed: int, *parts: Any) -> int:
    """A 64-bit seed from ``seed`` and ``parts`` (blake2b of their ``:``-joined text)."""
    text = ":".join([str(seed)] + [str(p) for p in parts])
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class SubgraphSample:
    """One controlled subgraph: the target, the achieved ratio and the graph."""

    measure: str
    fraction: float
    tolerance: float
    full_value: float
    value: float
    graph: SceneGraph
    kept_objects: Tuple[int, ...]
    kept_attributes: Tuple[int, ...]
    kept_relations: Tuple[int, ...]

    @property
    def ratio(self) -> float:
        return self.value / self.full_value

    def to_dict(self) -> Dict[str, Any]:
        return {"measure": self.measure, "fraction": self.fraction, "tolerance": self.tolerance,
                "full_value": self.full_value, "value": self.value, "ratio": self.ratio,
                "kept_objects": list(self.kept_objects), "kept_attributes": list(self.kept_attributes),
                "kept_relations": list(self.kept_relations), "graph": self.graph.to_json()}


def _in_band(ratio: float, fraction: float, tolerance: float) -> bool:
    return abs(ratio - fraction) <= tolerance + 1e-12


def _nonempty_subset(rng: random.Random, items: Sequence[int]) -> List[int]:
    while True:
        pick = [i for i in items if rng.random() < 0.5]
        if pick:
            return pick


def _sample_icr(graph: SceneGraph, grounded: Any, fraction: float, tolerance: float, rng: random.Random
                ) -> Optional[Tuple[List[int], float, float]]:
    if grounded is None:
        return None
    by_cat: Dict[str, List[int]] = {}
    free: List[int] = []
    for i, name in enumerate(graph.objects):
        cat = grounded.category_of(name)
        if cat is not None and grounded.grounds(name):
            by_cat.setdefault(cat, []).append(i)
        else:
            free.append(i)
    cats = sorted(by_cat)
    full = grounded.union_area([graph.objects[by_cat[c][0]] for c in cats])
    if full <= 0:
        return None

    def area(subset: Sequence[str]) -> int:
        return grounded.union_area([graph.objects[by_cat[c][0]] for c in subset])

    feasible: List[Tuple[Tuple[str, ...], int]] = []
    if len(cats) <= MAX_ENUMERATED_CATEGORIES:
        for r in range(1, len(cats) + 1):
            for sub in combinations(cats, r):
                a = area(sub)
                if _in_band(a / full, fraction, tolerance):
                    feasible.append((sub, a))
    else:
        seen = set()
        for _ in range(RANDOM_TRIES):
            sub = tuple(sorted(rng.sample(cats, rng.randint(1, len(cats)))))
            if sub in seen:
                continue
            seen.add(sub)
            a = area(sub)
            if _in_band(a / full, fraction, tolerance):
                feasible.append((sub, a))
    if not feasible:
        return None
    # weight of a category set = number of object subsets realising it
    logw = [sum(math.log(2 ** len(by_cat[c]) - 1) for c in sub) for sub, _ in feasible]
    top = max(logw)
    weights = [math.exp(w - top) for w in logw]
    sub, a = feasible[rng.choices(range(len(feasible)), weights=weights)[0]]
    keep: List[int] = []
    for c in sub:
        keep += _nonempty_subset(rng, by_cat[c])
    keep += [i for i in free if rng.random() < 0.5]
    return sorted(keep), a / (grounded.width * grounded.height), full / (grounded.width * grounded.height)


def _sample_aod(graph: SceneGraph, fraction: float, tolerance: float, relation_ends: str, rng: random.Random
                ) -> Optional[Tuple[List[int], List[int]]]:
    n_a, n_r = graph.n_attributes, graph.n_relations
    w = 2.0 if relation_ends == "both" else 1.0
    total = n_a + w * n_r
    if total <= 0:
        return None
    pairs, logw = [], []
    for a in range(n_a + 1):
        for r in range(n_r + 1):
            if _in_band((a + w * r) / total, fraction, tolerance):
                pairs.append((a, r))
                logw.append(math.lgamma(n_a + 1) - math.lgamma(a + 1) - math.lgamma(n_a - a + 1)
                            + math.lgamma(n_r + 1) - math.lgamma(r + 1) - math.lgamma(n_r - r + 1))
    if not pairs:
        return None
    top = max(logw)
    a, r = pairs[rng.choices(range(len(pairs)), weights=[math.exp(x - top) for x in logw])[0]]
    return sorted(rng.sample(range(n_a), a)), sorted(rng.sample(range(n_r), r))


def sample_subgraph(graph: SceneGraph, measure: str, fraction: float, grounded: Any = None, seed: int = 0,
                    caption_id: Any = "", tolerance: float = TOLERANCE,
                    relation_ends: str = DEFAULT_RELATION_ENDS) -> Optional[SubgraphSample]:
    """A seeded subgraph at ``fraction`` (± ``tolerance``) of the caption's ICR or AOD (module
    docstring); ``None`` when no subgraph meets the target or the full value is 0/unavailable."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if relation_ends not in RELATION_ENDS:
        raise ValueError(f"relation_ends must be one of {RELATION_ENDS}, got {relation_ends!r}")
    rng = random.Random(derived_seed(seed, caption_id, measure, f"{fraction:.6f}"))
    if measure == "icr":
        got = _sample_icr(graph, grounded, fraction, tolerance, rng)
        if got is None:
            return None
        keep, value, full = got
        sub = graph.subgraph(keep)
        ka = tuple(j for j, at in enumerate(graph.attributes) if at.object in set(keep))
        kr = tuple(j for j, rel in enumerate(graph.relations) if rel.subject in set(keep) and rel.object in set(keep))
        return SubgraphSample(measure, fraction, tolerance, full, value, sub, tuple(keep), ka, kr)
    got2 = _sample_aod(graph, fraction, tolerance, relation_ends, rng)
    if got2 is None:
        return None
    ka_l, kr_l = got2
    keep_all = list(range(graph.n_objects))
    sub = graph.subgraph(keep_all, ka_l, kr_l)
    return SubgraphSample(measure, fraction, tolerance, aod(graph, relation_ends), aod(sub, relation_ends), sub,
                          tuple(keep_all), tuple(ka_l), tuple(kr_l))


def controlled_subgraphs(graph: SceneGraph, grounded: Any = None, measures: Sequence[str] = MEASURES,
                         fractions: Sequence[float] = FRACTIONS, seed: int = 0, caption_id: Any = "",
                         tolerance: float = TOLERANCE, relation_ends: str = DEFAULT_RELATION_ENDS
                         ) -> List[Dict[str, Any]]:
    """Every (measure, fraction) target of one caption: ``{measure, fraction, status, sample?}``
    with ``status`` ``ok`` or ``unreachable``."""
    out = []
    for m in measures:
        for f in fractions:
            s = sample_subgraph(graph, m, f, grounded, seed, caption_id, tolerance, relation_ends)
            out.append({"measure": m, "fraction": f, "status": "ok" if s is not None else "unreachable",
                        "sample": s})
    return out


# -- realisation ----------------------------------------------------------------------------------
_VOWEL = tuple("aeiou")
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
            "ten": 10, "pair": 2, "couple": 2, "dozen": 12, "both": 2}


def _plural(noun: str) -> str:
    head, _, last = noun.rpartition(" ")
    if last.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in _VOWEL:
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def _article(phrase: str) -> str:
    return ("an " if phrase[:1].lower() in _VOWEL else "a ") + phrase


class TemplateRealiser:
    """``capaudit-template-realiser``: a deterministic template caption of a scene graph (a
    template baseline, not a language model). One sentence lists the objects with their
    attributes (counts and pre-nominal attributes before the noun, states and text after it);
    one sentence per relation: ``The <subject> <predicate> the <object>.``"""

    name = REALISER_NAME
    label = REALISER_LABEL

    def object_phrase(self, graph: SceneGraph, i: int) -> str:
        attrs = graph.attributes_of(i)
        count = next((a.value for a in attrs if a.kind == "count"), None)
        pre = [a.value for a in attrs if a.kind in ("attribute", "state") and a.position == "pre"]
        post = [a.value for a in attrs if a.kind == "state" and a.position == "post"]
        text = [a.value for a in attrs if a.kind == "text"]
        noun = graph.objects[i]
        if count is not None:
            n = int(count) if count.isdigit() else _NUMBERS.get(count)
            if n is None or n > 1:  # "two", "12", "several" -> plural
                noun = _plural(noun)
        core = " ".join(pre + [noun])
        phrase = f"{count} {core}" if count is not None else _article(core)
        if post:
            phrase += " " + " and ".join(post)
        if text:
            phrase += " with " + " and ".join(text)
        return phrase

    def realise(self, graph: SceneGraph) -> str:
        if not graph.objects:
            return ""
        phrases = [self.object_phrase(graph, i) for i in range(graph.n_objects)]
        first = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
        sentences = [first[:1].upper() + first[1:] + "."]
        for r in graph.relations:
            sentences.append(f"The {graph.objects[r.subject]} {r.predicate} the {graph.objects[r.object]}.")
        return " ".join(sentences)


REALISE_SYSTEM_PROMPT = (
    "You write one fluent, natural image caption that states exactly the content of a scene graph: "
    "every object with its attributes and every relation, and nothing else. Reply with compact, valid "
    "JSON and nothing else."
)


def realise_schema() -> Dict[str, Any]:
    return {"type": "object", "properties": {"caption": {"type": "string", "minLength": 1, "maxLength": 2000}},
            "required": ["caption"], "additionalProperties": False}


def build_realise_request(graph: SceneGraph, sample_id: str, model: str, revision: Optional[str] = None,
                          max_tokens: int = 512, temperature: float = 0.0,
                          meta: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A content-addressed request asking ``model`` to realise ``graph`` as a caption."""
    from capaudit.llm.requests import make_request

    g = graph.to_json()
    g.pop("parser", None)
    g.pop("meta", None)
    user = ("Write the caption for this scene graph (object indices start at 0).\n"
            "Answer only with JSON that matches this schema:\n" + canonical(realise_schema()) +
            f"\nsample_id={sample_id}\nscene_graph=" + canonical(g))
    return make_request(task=REALISE_TASK, task_version=REALISE_TASK_VERSION, model=model, revision=revision,
                        prompt_version=REALISE_PROMPT_VERSION, schema=realise_schema(),
                        messages=[{"role": "system", "content": REALISE_SYSTEM_PROMPT}, {"role": "user", "content": user}],
                        decoding={"temperature": float(temperature), "max_tokens": int(max_tokens)},
                        input={"sample_id": sample_id, "scene_graph": g}, meta=meta)


def realise_with_model(graphs: Sequence[SceneGraph], ids: Sequence[str], urls: Sequence[str], model: str,
                       store: Union[str, Path], revision: Optional[str] = None, **run_kwargs: Any
                       ) -> List[Optional[str]]:
    """Captions for ``graphs`` from ``model`` through :func:`capaudit.llm.client.run_requests`
    (resumable store); ``None`` where the call failed."""
    from capaudit.llm.client import run_requests
    from capaudit.llm.store import merge

    rows = [build_realise_request(g, str(i), model, revision) for g, i in zip(graphs, ids)]
    Path(store).parent.mkdir(parents=True, exist_ok=True)
    run_requests(rows, str(store), list(urls), model, resume=True, progress=False, handle_signals=False, **run_kwargs)
    answers = merge(store) if Path(store).exists() else {}
    out: List[Optional[str]] = []
    for r in rows:
        a = answers.get(r["request_id"])
        cap = (a.get("parsed") or {}).get("caption") if a and a.get("ok") else None
        out.append(cap if isinstance(cap, str) else None)
    return out


__all__ = ["FRACTIONS", "TOLERANCE", "MEASURES", "REALISER_NAME", "REALISER_LABEL", "SubgraphSample",
           "derived_seed", "sample_subgraph", "controlled_subgraphs", "TemplateRealiser", "realise_schema",
           "build_realise_request", "realise_with_model"]
