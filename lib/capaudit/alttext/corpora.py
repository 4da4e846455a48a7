"""The alt-text stage's corpora from its params: row sources of the filter corpora and ``(text, url)``
streams of the coverage corpora (row sources, the params file's ``surfaces``, filtered outputs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from capaudit.config import RunConfig
from capaudit.errors import InputError

from .coverage import texts_of_rows
from .funnel import build_pipeline
from .rows import RowSource

if TYPE_CHECKING:
    from .params import AlttextParams


def safe_name(name: str) -> str:
    """``name`` when it is safe as a file-name part (letters, digits, ``_ . -``); an error otherwise."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise InputError(f"corpus/pipeline names may hold letters, digits, '_', '.', '-' only: {name!r}",
                         field="name")
    return name


def corpus_source(spec: Mapping[str, Any]) -> Tuple[RowSource, str, Optional[str]]:
    """``(row source, text field, url field)`` of a rows corpus."""
    if "text_field" not in spec:
        raise InputError(f"corpus {spec.get('name', '?')}: 'text_field' is required", field="text_field")
    src = RowSource.from_spec({k: v for k, v in spec.items() if k not in ("pipelines",)})
    return src, str(spec["text_field"]), spec.get("url_field")


def surface_spec(cfg: RunConfig, name: str) -> Dict[str, Any]:
    """The params file's ``surfaces`` entry called ``name``."""
    for s in cfg.raw.get("surfaces", []) or []:
        if isinstance(s, Mapping) and s.get("name") == name:
            return dict(s)
    raise InputError(f"{cfg.path}: surface {name!r} is not in the params file's 'surfaces' list", field="surface")


class RowsTexts:
    """``(text, url)`` of a rows corpus (non-blank string texts), with the source for the engine."""

    def __init__(self, source: RowSource, text_field: str, url_field: Optional[str]):
        self.source, self.text_field, self.url_field = source, text_field, url_field

    def __iter__(self) -> Iterator[Tuple[str, Optional[str]]]:
        return texts_of_rows(self.source, self.text_field, self.url_field, lists=False)


def _missing(file: Any) -> bool:
    return bool(file) and not any(ch in str(file) for ch in "*?[") and not Path(str(file)).exists()


def corpus_texts(cfg: RunConfig, spec: Mapping[str, Any]) -> Tuple[str, Optional[Any], str]:
    """(name, iterable of (text, url) or None when the input is missing, note); a rows corpus's
    iterable is a :class:`RowsTexts` (its ``.source``, ``.text_field`` and ``.url_field``)."""
    spec = dict(spec)
    if "surface" in spec or ("text_field" not in spec and ("dataset" in spec or "file" in spec or "format" in spec)):
        from capaudit.surfaces import iter_captions

        sspec = surface_spec(cfg, spec["surface"]) if "surface" in spec else dict(spec)
        sspec.pop("surface", None)
        name = str(spec.get("name") or sspec.get("name"))
        url_field = spec.get("url_field")
        if url_field:
            sspec["meta_fields"] = [url_field]
        file = sspec.get("file")
        if _missing(file):
            return name, None, f"skipped: {file} not found"
        sspec.pop("url_field", None)
        return name, ((r.caption, r.meta.get(url_field) if url_field else None) for r in iter_captions(sspec)), "surface"
    name = str(spec.get("name") or "corpus")
    file = spec.get("file")
    if _missing(file):
        return name, None, f"skipped: {file} not found"
    src, text_field, url_field = corpus_source(spec)
    return name, RowsTexts(src, str(text_field), url_field), "rows"


def filter_outputs(cfg: RunConfig, corpus: str, pipeline: str) -> Dict[str, Path]:
    """The kept, dropped, funnel and manifest files of one corpus and pipeline."""
    base = cfg.dirs()["artifacts"] / "alttext" / "filters" / safe_name(corpus) / safe_name(pipeline)
    return {"kept": base / "kept.jsonl", "dropped": base / "dropped.jsonl", "funnel": base / "funnel.csv",
            "manifest": base / "manifest.json"}


def input_name(spec: Mapping[str, Any]) -> str:
    """A corpus's input as the params name it (dataset/path, file, or source)."""
    if spec.get("dataset"):
        return f"{spec['dataset']}:{spec.get('path', '')}"
    return str(spec.get("file") or spec.get("source") or spec.get("surface") or spec.get("name"))


def coverage_corpora(cfg: RunConfig, params: "AlttextParams"
                     ) -> Tuple[List[Tuple[str, Any, str]], Dict[str, Mapping[str, Any]]]:
    """``([(name, texts or None, note)], specs by name)``: the configured corpora, extra surfaces and
    each pipeline's kept rows of the ``filtered`` corpora."""
    corpora: List[Tuple[str, Any, str]] = []
    specs: Dict[str, Mapping[str, Any]] = {}
    for spec in list(params.coverage.corpora) + list(params.coverage.extra_surfaces):
        spec = {"surface": spec} if isinstance(spec, str) else spec
        corpora.append(corpus_texts(cfg, spec))
        specs[corpora[-1][0]] = spec
    filt_corpora = params.filter_corpora()
    for cname in params.coverage.filtered:
        c = filt_corpora.get(cname)
        if c is None:
            raise InputError(f"{cfg.path}: alttext.coverage.filtered names {cname!r}, not a filter corpus",
                             field="alttext.coverage.filtered")
        for ps in c.get("pipelines", list(params.filters.pipelines)):
            pname = build_pipeline(ps).name
            kept = filter_outputs(cfg, cname, pname)["kept"]
            spec = {"name": f"{cname}:{pname}", "file": str(kept), "text_field": c["text_field"],
                    "url_field": c.get("url_field")}
            corpora.append(corpus_texts(cfg, spec) if kept.exists() else
                           (spec["name"], None, "skipped: run the 10_alttext_filters notebook first"))
            specs[spec["name"]] = spec
    return corpora, specs


__all__ = ["RowsTexts", "corpus_source", "corpus_texts", "coverage_corpora", "filter_outputs", "input_name",
           "safe_name", "surface_spec"]
