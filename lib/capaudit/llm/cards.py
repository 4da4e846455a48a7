"""Model cards: who answers a model name, declared by the server and recorded by the client.

A card is ``{kind, version, label, caveat}`` for one served model name:

* ``kind`` — ``"heuristic"`` (a rule-based stand-in of :mod:`capaudit.standins`), ``"random-vision
  test model"`` (a vLLM test model with random weights: answers, but not evidence), ``"real"`` (a
  real model) or ``"unknown"`` (the server said nothing: no ``/v1/models`` route, or unreachable);
* ``version`` — what the answers depend on beyond the name (a stand-in's rule-set version; hashed
  into request ids as the model revision);
* ``label`` — the name printed in tables and manifests (a stand-in says what it is);
* ``caveat`` — one line a reader of any artifact the model fed must see (empty for a real model);
* optional: ``short`` (a short label for a table column) and ``needs`` (request inputs the backend
  reads beyond the usual ones, e.g. ``judged_caption``).

``capaudit serve`` declares the card of every backend in ``GET /v1/models`` (``capaudit: {...}``
on each entry) and in every chat completion (``capaudit_model: {...}``). A server that declares
none (vLLM) is read from its own entry (``id``, ``root``, ``owned_by``, ``max_model_len``): when
``root`` is a local folder holding ``capaudit_model.json`` (a JSON object with at least ``kind``,
``label`` and ``caveat``; a test model writes one) that file is the card; when ``root`` is an
absolute path that is not a folder here (a server on another machine serving a local folder), the
card cannot be read and the kind is ``"unknown"``; else (a Hub id, a folder without a card) the
kind is ``"real"``. :func:`fetch_cards` reads the cards of the served models; the client records them beside
its response store (:func:`capaudit.llm.store.record_answerers`) and stages read them back
(:func:`capaudit.llm.store.answered_by`) instead of recognising model names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

KINDS = ("heuristic", "random-vision test model", "real", "unknown")
#: The file a local model folder may hold to declare its card (vLLM serves it from ``root``).
CARD_FILE = "capaudit_model.json"
CARD_FIELDS = ("kind", "version", "label", "caveat")
#: Fields of a vLLM ``/v1/models`` entry kept in the recorded card.
VLLM_FIELDS = ("id", "root", "owned_by", "max_model_len")


@dataclass(frozen=True)
class ModelCard:
    """The card of one model name (module docstring)."""

    name: str
    kind: str
    version: str = ""
    label: str = ""
    caveat: str = ""
    short: str = ""
    needs: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"model card {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def stand_in(self) -> bool:
        """True for anything but a real model (a heuristic, a random-weight test model, or unknown)."""
        return self.kind != "real"

    def to_json(self) -> Dict[str, Any]:
        """``{kind, version, label, caveat}`` (``label`` defaults to the name), plus ``short`` and
        ``needs`` where set."""
        out: Dict[str, Any] = {"kind": self.kind, "version": self.version, "label": self.label or self.name,
                               "caveat": self.caveat}
        if self.short:
            out["short"] = self.short
        if self.needs:
            out["needs"] = list(self.needs)
        return out

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> "ModelCard":
        kind = str(data.get("kind") or "unknown")
        needs = data.get("needs") or ()
        return cls(name=name, kind=kind if kind in KINDS else "unknown", version=str(data.get("version") or ""),
                   label=str(data.get("label") or name), caveat=str(data.get("caveat") or ""),
                   short=str(data.get("short") or ""),
                   needs=tuple(str(x) for x in needs) if isinstance(needs, (list, tuple)) else ())


def unknown_card(name: str, why: str = "") -> Dict[str, Any]:
    """The recorded card of a model whose server declares nothing."""
    return {"model": name, "kind": "unknown", "version": "", "label": name,
            "caveat": f"who answered {name} is unknown" + (f" ({why})" if why else ""), "source": "unknown"}


def _local_card(root: Any) -> Optional[Dict[str, Any]]:
    """``<root>/capaudit_model.json`` when ``root`` is a local folder holding one (a JSON object
    with at least ``kind``, ``label`` and ``caveat``), else ``None``."""
    if not isinstance(root, str) or not root:
        return None
    path = Path(root) / CARD_FILE
    try:
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("kind", "label", "caveat")):
        return None
    return data


def card_of_entry(entry: Mapping[str, Any]) -> Dict[str, Any]:
    """The recorded card of one ``/v1/models`` entry (module docstring): ``{model, kind, version,
    label, caveat, source}`` plus the vLLM fields the entry has."""
    name = str(entry.get("id", ""))
    kept = {k: entry[k] for k in VLLM_FIELDS if k in entry and k != "id"}
    declared = entry.get("capaudit")
    if isinstance(declared, Mapping):
        return {"model": name, **ModelCard.from_json(name, declared).to_json(), "source": "capaudit serve", **kept}
    root = entry.get("root")
    local = _local_card(root)
    if local is None and isinstance(root, str) and Path(root).is_absolute() and not Path(root).is_dir():
        return {**unknown_card(name, f"served from {root}, a folder not readable here, so its {CARD_FILE} "
                                     "cannot be checked"), **kept}
    if local is not None:
        kind = local["kind"] if local["kind"] in KINDS else "unknown"
        return {"model": name, "kind": kind, "version": str(local.get("version") or ""), "label": local["label"],
                "caveat": local["caveat"], "source": f"{entry.get('root')}/{CARD_FILE}", **kept}
    return {"model": name, "kind": "real", "version": "", "label": name, "caveat": "",
            "source": "server model list", **kept}


def cards_label(cards: Sequence[Mapping[str, Any]], default: str) -> str:
    """The name written into artifacts for the models that answered: their cards' labels (a
    stand-in says what it is), ``default`` when none was recorded."""
    labels = list(dict.fromkeys(str(c.get("label") or c.get("model") or default) for c in cards))
    return " + ".join(labels) if labels else default


def any_stand_in(cards: Sequence[Mapping[str, Any]]) -> bool:
    """True when a card that answered is not a real model (a heuristic, a test model, unknown)."""
    return any(c.get("kind") != "real" for c in cards)


def card_kinds(cards: Sequence[Mapping[str, Any]]) -> List[str]:
    """The distinct kinds of the cards that answered, in :data:`KINDS` order."""
    seen = {str(c.get("kind") or "unknown") for c in cards}
    return [k for k in KINDS if k in seen]


def models_url(url: str) -> str:
    """``<base>/v1/models`` of an endpoint given as a base URL or its chat-completions URL."""
    base = url.rstrip("/")
    for tail in ("/chat/completions", "/v1"):
        if base.endswith(tail):
            base = base[: -len(tail)]
    return base + "/v1/models"


class _Unreachable(Exception):
    """``GET /v1/models`` got no answer at all (connection refused, timeout): nothing was declared or not."""


def _models_body(url: str, api_key: Optional[str], timeout: float) -> Any:
    """The parsed ``GET /v1/models`` body (``None``: an HTTP error or not JSON, i.e. the server
    declares nothing); raises :class:`_Unreachable` when the server did not answer."""
    import urllib.error
    import urllib.request

    rq = urllib.request.Request(models_url(url), headers={"Authorization": f"Bearer {api_key or 'sk-fake'}"})
    try:
        with urllib.request.urlopen(rq, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError:
        return None
    except ValueError:
        return None
    except OSError as exc:  # URLError, timeouts, resets: no answer
        raise _Unreachable(str(exc)) from exc


def _entries(body: Any) -> Optional[List[Dict[str, Any]]]:
    data = body.get("data") if isinstance(body, dict) else None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else None


def fetch_model_entries(url: str, api_key: Optional[str] = None, timeout: float = 10.0) -> Optional[List[Dict[str, Any]]]:
    """The ``data`` entries of ``GET /v1/models``; ``None`` when the server has no such route, is
    unreachable or answers something else."""
    try:
        return _entries(_models_body(url, api_key, timeout))
    except _Unreachable:
        return None


def fetch_card(url: str, model: str, api_key: Optional[str] = None, timeout: float = 10.0) -> Dict[str, Any]:
    """The recorded card of ``model`` as the server at ``url`` declares it (``kind: unknown`` when
    it declares nothing or does not list the model); ``url`` is added. A server that does not answer
    at all gets an unknown card with ``reachable: False``, which is never recorded."""
    try:
        body = _models_body(url, api_key, timeout)
    except _Unreachable as exc:  # not asked at all: such a card is not recorded (llm.store.record_answerers)
        return {**unknown_card(model, f"/v1/models did not answer: {exc}"), "url": url, "reachable": False}
    entries = _entries(body)
    if entries is None:
        return {**unknown_card(model, "no /v1/models"), "url": url}
    for e in entries:
        if e.get("id") == model:
            return {**card_of_entry(e), "url": url}
    return {**unknown_card(model, "not in /v1/models"), "url": url}


def fetch_cards(urls: Sequence[str], model: str, api_key: Optional[str] = None,
                timeout: float = 10.0) -> List[Dict[str, Any]]:
    """:func:`fetch_card` of ``model`` at each URL."""
    return [fetch_card(u, model, api_key, timeout) for u in urls]


def model_revision(url: str, model: str, api_key: Optional[str] = None, timeout: float = 10.0) -> Optional[str]:
    """The version the server declares for ``model`` (a stand-in's rule set), to hash into request
    ids as the revision; ``None`` for a real or unknown model (its revision is the caller's to give)."""
    card = fetch_card(url, model, api_key, timeout)
    return (card.get("version") or None) if card.get("source") not in ("unknown", "server model list") else None


__all__ = ["CARD_FIELDS", "CARD_FILE", "KINDS", "ModelCard", "VLLM_FIELDS", "card_of_entry", "fetch_card", "fetch_cards",
           "fetch_model_entries", "model_revision", "models_url", "unknown_card"]
