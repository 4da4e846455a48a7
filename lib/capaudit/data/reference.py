"""The reference study's published files, read through a checksummed registry.

The reference study (BootsofLagrangian/audit-recap-t2i) publishes result summaries, configs and
its model-facing text; a copy lives in a folder laid out like its repository (``results/``,
``configs/``, ``prompts/``; ``../shared/reference`` beside a checkout). The project never copies
them: :func:`fetch_reference` returns the path inside :func:`reference_dir` after checking the
file's sha256 against ``reference_registry.json`` (next to this module), so a changed or corrupt
copy is refused with one line naming it.

``reference_registry.json`` is generated from that folder and its ``PROVENANCE.md`` by
``python -m capaudit.data.reference ../shared/reference``: every file becomes one entry whose
sha256 is computed and, where PROVENANCE lists one, checked against its published sha256 prefix;
the source URL is the repository file at the listed commit (the ``prompts/`` files are
transcriptions of several scripts' string constants, so they have no single source URL and are
never downloaded).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .build_registry import RAW_URL
from .registry import fetch, file_sha256

ENV_REFERENCE_DIR = "CAPAUDIT_REFERENCE_DIR"
REGISTRY_PATH = Path(__file__).with_name("reference_registry.json")
REPOSITORY = "BootsofLagrangian/audit-recap-t2i"
SKIP_NAMES = {"PROVENANCE.md", "README.md"}
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*`([0-9a-f]{40})`\s*\|.*\|\s*`([0-9a-f]{16,64})`\s*\|\s*$")


def reference_dir() -> Path:
    """``$CAPAUDIT_REFERENCE_DIR``, else ``reference`` beside the data folder (``../shared``)."""
    env = os.environ.get(ENV_REFERENCE_DIR)
    if env:
        return Path(env).expanduser()
    from .registry import data_dir

    return data_dir().parent / "reference"


def fetch_reference(path: str, *, verify: bool = True) -> Path:
    """Local path of the reference file ``path`` (e.g. ``prompts/claimed_cbu_v2.json``), sha256-checked."""
    top, _, rest = path.partition("/")
    if not rest:
        raise KeyError(f"{path}: a reference path names a folder and a file, e.g. prompts/claimed_cbu_v2.json")
    local = reference_dir() / top / rest
    if not local.is_file():
        from .registry import DataError, entry

        entry(top, rest, registry_path=REGISTRY_PATH)  # KeyError for a file the registry does not know
        raise DataError(f"{local}: reference file {path} is missing; set {ENV_REFERENCE_DIR} to the reference "
                        f"study's folder (a copy of shared/reference, see its PROVENANCE.md)")
    return fetch(top, rest, verify=verify, download=False, registry_path=REGISTRY_PATH, root=reference_dir())


def read_provenance(text: str) -> Dict[str, tuple]:
    """``path -> (commit, sha256 prefix)`` of the PROVENANCE.md file table."""
    out: Dict[str, tuple] = {}
    for line in text.splitlines():
        m = _ROW.match(line.strip())
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def build(root: Path) -> Dict[str, object]:
    """The registry of every file under ``root`` (module docstring); ``ValueError`` on a mismatch."""
    root = Path(root)
    prov_path = root / "PROVENANCE.md"
    if not prov_path.is_file():
        raise FileNotFoundError(f"{prov_path}: PROVENANCE.md not found")
    listed = read_provenance(prov_path.read_text(encoding="utf-8"))
    entries: List[Dict[str, object]] = []
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in SKIP_NAMES):
        rel = f.relative_to(root).as_posix()
        top, _, rest = rel.partition("/")
        sha = file_sha256(f, use_cache=False)
        commit, prefix = listed.get(rel, (None, None))
        if prefix is not None and not sha.startswith(prefix):
            raise ValueError(f"{f}: sha256 {sha} does not start with PROVENANCE.md's {prefix}")
        entries.append({
            "dataset": top, "path": rest, "kind": "file", "sha256": sha,
            "bytes": f.stat().st_size, "repository": REPOSITORY, "commit": commit,
            "url": RAW_URL.format(repository=REPOSITORY, commit=commit, path=rel) if commit else "",
            "sha256_source": "provenance prefix + computed" if prefix else "computed",
            "license": "Apache-2.0 (repository); quoted caption text CC-BY-4.0",
        })
    return {"version": 1, "generated_by": "python -m capaudit.data.reference <reference folder>",
            "repository": REPOSITORY, "entries": entries}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m capaudit.data.reference", description=__doc__.splitlines()[0])
    ap.add_argument("root", help="the reference folder (e.g. ../shared/reference)")
    ap.add_argument("--out", default=str(REGISTRY_PATH))
    args = ap.parse_args(argv)
    try:
        reg = build(Path(args.root))
    except (OSError, ValueError) as exc:
        print(f"capaudit: {exc}", file=sys.stderr)
        return 2
    Path(args.out).write_text(json.dumps(reg, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(reg['entries'])} reference files -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
