"""Before a run starts: is everything its params file names reachable from here?

A params file can name Hugging Face datasets (``surfaces`` of ``format: hf``, prompt pools with
``hub:``) and model endpoints
(``claims.url``, ``judges.extractor_url``, ``judges.judges[].url``, ``recap.url``). A run that needs an
unreachable one would fail minutes in, after partial work; :func:`check` asks each of them once, in
parallel, with a short timeout, so ``make paper PARAMS=params/paper.yaml`` on a machine without the
Hub or the GPUs stops in seconds with one line naming what is unreachable. A params file that names
neither (the demo: local data, offline backends in-process) is not checked at all.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable, List, Mapping, Optional, Tuple

from capaudit.config import RunConfig
from capaudit.errors import InputError

HUB = "https://huggingface.co"
TIMEOUT_S = 4.0
OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "CAPAUDIT_OFFLINE")


@dataclass(frozen=True)
class Need:
    """One thing a run needs from outside: a Hub dataset or a model endpoint, and where it is named."""

    kind: str  # "hub" | "endpoint"
    target: str  # repo id (with @revision) or URL
    where: str  # the params key naming it


def needs(cfg: RunConfig) -> List[Need]:
    """Every Hub dataset and endpoint the params file names (module docstring)."""
    out: List[Need] = []
    for i, s in enumerate(cfg.raw.get("surfaces") or []):
        if isinstance(s, Mapping) and s.get("format") == "hf" and s.get("hf_path") and not s.get("data_files"):
            rev = s.get("revision")
            out.append(Need("hub", str(s["hf_path"]) + (f"@{rev}" if rev else ""), f"surfaces[{s.get('name', i)}]"))
    ps = cfg.raw.get("prompt_support")
    prep = ((ps.get("pools") or {}).get("prepare") or {}) if isinstance(ps, Mapping) else {}
    for src in prep.get("sources") or []:
        if isinstance(src, Mapping) and src.get("hub"):
            out.append(Need("hub", _pool_repo(str(src["hub"])) + (f"@{src['revision']}" if src.get("revision") else ""),
                            f"prompt_support.pools.prepare.sources[{src.get('name', src['hub'])}]"))
    cc = cfg.raw.get("cc12m")
    if isinstance(cc, Mapping):  # local copies of Hub repositories, downloaded when absent
        from capaudit.cc12m.stage import is_present

        pairs = [(x.get("path"), x.get("hub"), f"cc12m.surfaces[{x.get('name', i)}]")
                 for i, x in enumerate(cc.get("surfaces") or []) if isinstance(x, Mapping)]
        for path, hub, where in pairs + [(cc.get("shards"), cc.get("shards_hub"), "cc12m.shards")]:
            if isinstance(hub, Mapping) and hub.get("repo") and not (path and is_present(str(path))):
                out.append(Need("hub", str(hub["repo"]) + (f"@{hub['revision']}" if hub.get("revision") else ""), where))
    for section, key in (("claims", "url"), ("judges", "extractor_url"), ("recap", "url")):
        sec = cfg.raw.get(section)
        if isinstance(sec, Mapping) and sec.get(key):
            out += [Need("endpoint", str(u), f"{section}.{key}") for u in _as_list(sec[key])]
    for section in ("judges",):
        sec = cfg.raw.get(section)
        for j in (sec.get("judges") if isinstance(sec, Mapping) else None) or []:
            if isinstance(j, Mapping) and j.get("url"):
                out.append(Need("endpoint", str(j["url"]), f"{section}.judges[{j.get('name', '?')}].url"))
    return out


def _pool_repo(name: str) -> str:
    """The Hub repository of registered prompt pool ``name`` (the name itself if unregistered:
    the stage then refuses it in one line)."""
    from capaudit.data.registry import entry

    try:
        return str(entry("hf_prompt_pools", name).repository)
    except KeyError:
        return name


def _as_list(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _get(url: str, timeout: float, missing: Tuple[int, ...] = ()) -> Optional[str]:
    """``None`` when ``url`` answers (any HTTP status below 500 counts as reachable, except the
    ``missing`` ones: a dataset that is not found or gated), else why not."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as resp:
            resp.read(256)
        return None
    except urllib.error.HTTPError as exc:
        if exc.code in missing:
            return f"HTTP {exc.code}: not found or gated (is the repository id right?)"
        return None if exc.code < 500 else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return str(reason) or type(exc).__name__


def _hub_down(timeout: float) -> Optional[str]:
    """Why the Hub cannot be used from here (an offline flag, or no answer), else ``None``."""
    flag = next((f for f in OFFLINE_FLAGS if os.environ.get(f)), None)
    return f"{flag} is set" if flag else _get(f"{HUB}/api/datasets?limit=1", timeout)


def _probe(need: Need, timeout: float) -> Optional[str]:
    if need.kind == "endpoint":
        return _get(need.target.rstrip("/") + "/v1/models", timeout)
    repo, _, rev = need.target.partition("@")
    return _get(f"{HUB}/api/datasets/{repo}" + (f"/revision/{rev}" if rev else ""), timeout, missing=(401, 403, 404))


def unreachable(items: Iterable[Need], timeout: float = TIMEOUT_S) -> List[Tuple[Need, str]]:
    """The needs that do not answer, with the reason: every endpoint and the Hub itself probed at
    once; only when the Hub answers is each dataset (and revision) asked for."""
    items = list(items)
    hub = [n for n in items if n.kind == "hub"]
    endpoints = list({n.target: n for n in items if n.kind == "endpoint"}.values())
    with ThreadPoolExecutor(max_workers=16) as pool:
        hub_down = pool.submit(_hub_down, timeout) if hub else None
        answers = dict(zip([n.target for n in endpoints], pool.map(lambda n: _probe(n, timeout), endpoints)))
        down = hub_down.result() if hub_down else None
        hub_answers = ([down] * len(hub) if down else list(pool.map(lambda n: _probe(n, timeout), hub)))
    bad = [(n, answers[n.target]) for n in items if n.kind == "endpoint" and answers.get(n.target)]
    return bad + [(n, why) for n, why in zip(hub, hub_answers) if why]


def summary_line(cfg: RunConfig, bad: List[Tuple[Need, str]]) -> str:
    """One line: what is unreachable, grouped (Hub datasets, endpoints), with reasons."""
    parts = []
    hub = [(n, why) for n, why in bad if n.kind == "hub"]
    if hub:
        reasons = sorted({why for _, why in hub})
        parts.append(f"the Hugging Face Hub for {len(hub)} dataset{'s' if len(hub) > 1 else ''} "
                     f"(e.g. {hub[0][0].target} at {hub[0][0].where}: {'; '.join(reasons)[:200]})")
    for n, why in bad:
        if n.kind == "endpoint":
            parts.append(f"{n.where} {n.target} ({why[:120]})")
    return (f"{cfg.path}: cannot run here: unreachable: " + "; ".join(parts) +
            " — run it where these answer, or its offline fixture (capaudit plan fixture --params "
            f"{cfg.path} --out DIR)")


def check(cfg: RunConfig, timeout: float = TIMEOUT_S) -> None:
    """Raise :class:`InputError` (one line) when anything the params file names is unreachable."""
    items = needs(cfg)
    if not items:
        return
    bad = unreachable(items, timeout)
    if bad:
        raise InputError(summary_line(cfg, bad))


__all__ = ["Need", "needs", "unreachable", "summary_line", "check", "HUB"]
