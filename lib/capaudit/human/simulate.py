"""Simulated annotators and synthetic judged claims — for tests and the demo report only.

Simulated annotators are participants of kind ``simulated``: they are invited, log in, consent and
record through the same :class:`~capaudit.human.study.AnnotatorSession` API as people, every row
they write is stored with ``simulated = 1``, and :func:`capaudit.human.export.export_study` refuses a
real study that holds any. Their labels are *not* human evidence: an annotator reports a latent
"true" image support (the judges' majority answer, ties → ``uncertain``) with probability
``accuracy`` and a uniformly drawn other label otherwise — so judge–human agreement measured on
them only exercises the pipeline.

:func:`synthetic_judged_claims` writes a ``judged_claims.jsonl`` in the judges stage's schema from
COCO-MINI images and captions, for development and tests while no judges output exists. Its units
come from small templates (no model) or, with ``claims="extractor"``, from a served claims extractor
asked through ``capaudit serve`` and the model-call layer (this package loads no model); the
manifest beside the file names the source (the extractor by its recorded model card).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from capaudit.io.atomic import write_json_atomic, write_text_atomic

from .export import disagreements
from .protocol import CATEGORIES, PHASES, REASON_TAGS
from .study import AnnotatorSession, Study

PathLike = Union[str, Path]
SIM_LABELS = ("yes", "no", "uncertain")


def latent_truth(answers: Dict[str, str]) -> str:
    """The judges' majority answer (ties → ``uncertain``): the simulated annotators' latent truth."""
    top = Counter(answers.values()).most_common()
    if not top:
        return "uncertain"
    if len(top) > 1 and top[0][1] == top[1][1]:
        return "uncertain"
    return top[0][0]


def simulated_values(phase: str, item: Any, rng: random.Random, accuracy: float) -> Dict[str, Any]:
    """One simulated judgment of ``item`` (a study item row) in ``phase``."""
    if phase == "caption":
        licensed = "yes" if rng.random() < accuracy else rng.choice(("no", "uncertain"))
        atomic = "yes" if rng.random() < accuracy else rng.choice(("not_atomic", "not_visual", "uncertain"))
        check = "correct" if rng.random() < accuracy else rng.choice(("incorrect", "uncertain"))
        out: Dict[str, Any] = {"caption_licensed": licensed, "atomic_visual_claim": atomic, "category_check": check}
        if check == "incorrect":
            out["corrected_category"] = rng.choice([c for c in CATEGORIES if c != item["category"]])
        return out
    if phase == "image":
        if item["asset_status"] != "ok" or not item["image_path"] or not Path(item["image_path"]).is_file():
            return {"image_support": "image_unavailable"}
        truth = latent_truth(json.loads(item["judge_answers"]))
        label = truth if rng.random() < accuracy else rng.choice([x for x in SIM_LABELS if x != truth])
        out = {"image_support": label, "confidence": rng.randint(3, 5)}
        if label == "uncertain" and rng.random() < 0.5:
            out["reason_tags"] = [rng.choice(REASON_TAGS)]
        return out
    if item["asset_status"] != "ok" or not item["image_path"] or not Path(item["image_path"]).is_file():
        return {"image_unavailable": True}
    return {"salient_coverage": rng.randint(2, 5), "control_usefulness": rng.randint(2, 5)}


def run_simulated_session(session: AnnotatorSession, seed: int, accuracy: float = 0.85,
                          limit: Optional[int] = None) -> int:
    """Answer a simulated participant's queue in order (through :meth:`AnnotatorSession.record`)."""
    if not session.simulated:
        raise ValueError(f"{session.pseudonym} is not a simulated participant")
    if session.needs_consent():
        session.give_consent()
    rng = random.Random(f"{seed}:{session.pseudonym}")
    n = 0
    # phase by phase, whatever the batch size, so the simulated labels do not depend on it
    for t in sorted(session.tasks(refresh=True), key=lambda t: (PHASES.index(t.phase), t.position)):
        if limit is not None and n >= limit:
            break
        if session.saved(t.item_id, t.phase) is not None:
            continue
        item = session.study.item(t.item_id)
        session.record(t.item_id, t.phase, simulated_values(t.phase, item, rng, accuracy),
                       expected_revision=0, elapsed_ms=rng.randint(2000, 12000))
        n += 1
    return n


def invite_simulated(study: Study, n: int) -> List[str]:
    """Invite ``n`` simulated annotators; returns their invite codes (keep them in memory only)."""
    return [inv.code for inv in study.invite(n, kind="simulated")]


def simulate_annotators(study: Study, codes: Sequence[str], seed: int = 1477, accuracy: float = 0.85) -> int:
    """Log each simulated annotator in and answer their whole queue; returns the judgments written."""
    return sum(run_simulated_session(study.login(c), seed=seed, accuracy=accuracy) for c in codes)


def simulate_adjudication(study: Study, seed: int = 1477) -> int:
    """Resolve every open disagreement with a simulated adjudicator (picks one of the raters' labels)."""
    rng = random.Random(f"{seed}:adjudication")
    n = 0
    for d in disagreements(study):
        study.adjudicate(d.item_id, d.field, rng.choice(sorted(set(d.labels))), "SIM-adjudicator", simulated=True)
        n += 1
    return n


# -- synthetic judged claims (the judges stage's schema) ------------------------------------------------
_STYLE = ("photo", "snapshot", "black and white photo")
_CAMERA = ("close-up", "wide shot", "from above")
_LIGHTING = ("daylight", "sunlight", "dim light")
_TEXT = ("sign text", "written words", "a label")
_COLOURS = ("red", "blue", "green", "white", "black", "yellow", "brown", "gray")
_NUM = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _offsets(window: str, span: str, unit: str) -> Optional[List[int]]:
    low = window.lower()
    for s in (span, unit):
        if s:
            i = low.find(s.lower())
            if i >= 0:
                return [i, i + len(s)]
    return None


#: the served extractor whose units ``claims="extractor"`` uses (answered by ``capaudit serve`` in process)
EXTRACTOR_MODEL = "capaudit-heuristic-extractor"
TEMPLATES_SOURCE = "synthetic templates from the COCO instances (no model)"
JUDGES_SOURCE = "synthetic judges: COCO-grounded answers with seeded noise (no model)"


def claims_store(out: PathLike) -> Path:
    """The claims request/response folder of a synthetic judged-claims file (``claims="extractor"``)."""
    out = Path(out)
    return out.with_name(out.name.rsplit(".", 1)[0] + ".claims")


def manifest_path(out: PathLike) -> Path:
    """The manifest beside a synthetic judged-claims file: where its units and answers came from."""
    out = Path(out)
    return out.with_name(out.name.rsplit(".", 1)[0] + ".manifest.json")


def _served_units(windows: Dict[str, str], store: Path, model: str) -> Any:
    """The units ``model`` gives each window, asked through ``capaudit serve`` (in process) and the
    model-call layer (:func:`capaudit.claims.dsg_eval.extract_served`; requests and responses in ``store``)."""
    from capaudit.claims.dsg_eval import extract_served

    return extract_served(windows, store, model, surface="synthetic_judged_claims")


def synthetic_judged_claims(out: PathLike, *, judges: Sequence[str] = ("judge_a", "judge_b"),
                            surfaces: Sequence[str] = ("coco_caption_a", "coco_caption_b"), slice_name: str = "coco_mini_demo",
                            n_images: Optional[int] = None, seed: int = 0, missing_images: int = 0,
                            claims: str = "templates", extractor_model: str = EXTRACTOR_MODEL) -> Path:
    """Write judged claims in the judges stage's exact schema from COCO-MINI (real image paths).

    Surface ``k`` uses each image's ``k``-th COCO caption as its caption window. ``claims``:
    ``templates`` — objects and counts from the COCO instances of the image, the other six claim
    types from small templates (some not stated by the caption); ``extractor`` — the units the served
    claims extractor ``extractor_model`` (default the heuristic stand-in) gives each caption (real
    spans), asked through ``capaudit serve`` in this process and the model-call layer, with the
    requests and responses in :func:`claims_store`. Judge answers are COCO-grounded (``yes`` for
    present categories) with seeded noise. The first ``missing_images`` images get a path that does
    not exist (to exercise ``image_unavailable``). :func:`manifest_path` names the sources: the
    templates, or the extractor by the model card the client recorded, and the synthetic judges.
    """
    if claims not in ("templates", "extractor"):
        raise ValueError(f"claims must be 'templates' or 'extractor', got {claims!r}")
    from capaudit.data.coco import coco_mini

    idx = coco_mini()
    names = idx.category_names
    rng = random.Random(seed)
    images = list(idx)[: n_images or None]
    lines: List[str] = []
    served: Any = None
    if claims == "extractor":
        windows = {f"{surface}:{img.id}": " ".join(str(img.captions[si]["caption"]).split())
                   for img in images if img.path is not None
                   for si, surface in enumerate(surfaces) if si < len(img.captions)}
        served = _served_units(windows, claims_store(out), extractor_model)
    for ii, img in enumerate(images):
        if img.path is None:
            continue
        raw = img.path.read_bytes()
        key = "sha256:" + hashlib.sha256(raw).hexdigest()
        path = str(img.path) if ii >= missing_images else str(img.path.with_name("missing_" + img.path.name))
        counts = img.category_counts(names)
        present = sorted(counts)
        absent = sorted(set(names.values()) - set(counts))
        for si, surface in enumerate(surfaces):
            if si >= len(img.captions):
                continue
            window = " ".join(str(img.captions[si]["caption"]).split())
            caption_id = f"{surface}:{img.id}"
            units: List[Dict[str, str]] = []
            if served is not None:
                units = [dict(u) for u in served.units[caption_id]]
            for name in (present[:3] if claims == "templates" else ()):
                units.append({"category": "object", "unit": name, "target": name, "span": name})
            if claims == "templates" and rng.random() < 0.5 and absent:
                name = rng.choice(absent)
                units.append({"category": "object", "unit": name, "target": name, "span": ""})
            if claims == "templates" and present:
                top = max(present, key=lambda n: (counts[n], n))
                k = counts[top]
                units.append({"category": "count", "unit": f"{_NUM.get(k, str(k)) if k > 1 else 'one'} {top}",
                              "target": top, "span": ""})
                units.append({"category": "attribute", "unit": f"{rng.choice(_COLOURS)} {top}", "target": top, "span": ""})
                if len(present) > 1:
                    units.append({"category": "relation", "unit": f"{present[0]} near {present[1]}",
                                  "target": present[1], "span": ""})
            for cat, pool in (("style", _STYLE), ("camera", _CAMERA), ("lighting", _LIGHTING), ("text_rendering", _TEXT)):
                if claims == "templates" and rng.random() < 0.35:
                    u = rng.choice(pool)
                    units.append({"category": cat, "unit": u, "target": "scene", "span": ""})
            for ui, u in enumerate(units):
                off = _offsets(window, u["span"], u["unit"])
                span = window[off[0]:off[1]] if off else ""
                grounded = u["category"] in ("object", "count") and u["target"] in counts
                answers = {}
                for j in judges:
                    base = "yes" if grounded else rng.choice(("yes", "no", "uncertain"))
                    r = rng.random()
                    answers[j] = base if r < 0.8 else ("no" if base == "yes" else "yes") if r < 0.93 else "uncertain"
                row = {
                    "question_id": f"{caption_id}:u{ui:04d}", "caption_id": caption_id, "surface": surface,
                    "slice": slice_name, "category": u["category"], "unit": u["unit"], "target": u["target"],
                    "span": span, "span_offsets": off, "caption_window": window, "image_path": path,
                    "image_key": key, "answers": answers, "judges": list(judges),
                    "backend": {j: "offline" for j in judges},
                }
                lines.append(json.dumps(row, ensure_ascii=False))
    path = write_text_atomic(out, "\n".join(lines) + "\n")
    source: Dict[str, Any] = {"claims": claims, "judges": JUDGES_SOURCE, "rows": len(lines), "images": len(images)}
    if served is not None:
        source.update(claims_source=served.label, offline_extractor=served.offline, answered_by=served.cards,
                      claims_store=str(claims_store(out)))
    else:
        source["claims_source"] = TEMPLATES_SOURCE
    write_json_atomic(manifest_path(out), {"file": Path(out).name, "synthetic": True, **source})
    return path


def fixture_study(folder: PathLike, *, n_images: int = 20, humans: int = 1, simulated: int = 0,
                  missing_images: int = 0, seed: int = 0, open_study: bool = True, claims: str = "templates",
                  **config: Any):
    """A small sealed, assigned (and open) study from synthetic judged claims, for tests and trials.

    Returns ``(study, human_invites, simulated_invites)``. ``claims``: see
    :func:`synthetic_judged_claims`. ``config`` overrides
    :class:`~capaudit.human.protocol.StudyConfig` fields (defaults: 2 claims per stratum, strata
    present only, a 30-item cap).
    """
    from .protocol import StudyConfig

    folder = Path(folder)
    jc = synthetic_judged_claims(folder / "judged_claims.jsonl", n_images=n_images, seed=seed,
                                 missing_images=missing_images, claims=claims)
    settings: Dict[str, Any] = {"study_id": "fixture-study", "claims_per_stratum": 2, "require_all_strata": False,
                                "target_items": 30, "max_items": 40}
    settings.update(config)
    study = Study.create(folder / "study.sqlite", StudyConfig(**settings))
    study.sample([jc])
    study.seal()
    people = study.invite(humans) if humans else []
    sims = study.invite(simulated, kind="simulated") if simulated else []
    study.assign()
    if open_study:
        study.open()
    return study, people, sims


__all__ = [
    "EXTRACTOR_MODEL", "claims_store", "fixture_study", "invite_simulated", "manifest_path", "latent_truth", "run_simulated_session", "simulate_adjudication", "simulate_annotators", "simulated_values",
    "synthetic_judged_claims",
]
