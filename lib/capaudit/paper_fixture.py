"""The offline fixture of a study plan: the same params, small local files, offline backends.

``capaudit plan fixture --params params/paper.yaml --out DIR`` writes, for every Hugging Face
surface of the plan, a small Parquet file with that hub dataset's columns (the plan's
``caption_field`` and ``key_field``; ``caption`` where the plan auto-detects the caption column),
and ``DIR/<run>_fixture.yaml``: the plan with each hub surface replaced by its file and each model
endpoint by the in-process offline backends. Everything else (slices and their sizes and seeds,
budgets, text-stat orders, sample sizes, prompt set, decoding) is the plan's own, so a fixture run
exercises the plan as written and the plan cannot rot.

The rows are real captions: COCO Karpathy test images (data registry ``coco_karpathy_captions``),
one annotator's caption per surface (local surfaces the first caption, reference surface ``i`` of
the plan caption ``1 + i mod 4``). Keys are
the COCO image id written the way the key normalisation must unify (``zfill9``: ``391895`` on local
surfaces, ``000391895`` on reference ones; ``url``: upper-case scheme and host plus a fragment on
reference surfaces). Each surface leaves out a different tenth of the images, so every slice has
unmatched keys to count. Each Hub prompt pool (``prompt_support`` sources with ``hub:``) becomes a
local file in that pool's format and text field (txt, Parquet or JSONL, per the data registry) of
real user prompts: a disjoint run of DiffusionDB prompts from the ImageReward release (data
registry ``imagereward_diffusiondb_prompts``). The CC12M case study (``cc12m:``) gets real images:
COCO-MINI images (data registry ``coco_mini``) with one of their COCO captions per surface, each
surface's file in its plan columns and keyed the way the bridge must unify (unpadded and zero-padded
keys; the URL with an upper-case host), and WebDataset tar shards holding each image with a
``.json`` sidecar of its URL; each surface leaves out one image and the shards leave out a tenth
(counted out, as the reference judged the 4,494 of 5,000 its shards held). Its judges are the
offline stand-ins, whose reference-caption judge may see the judged COCO caption among its
references: the fixture's cells exercise the plan, they say nothing about captions. The fixture is
offline data, named as such: its run is ``<run>_fixture``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import yaml

from capaudit.errors import InputError

OFFLINE_EXTRACTOR = "capaudit-heuristic-extractor"
DEFAULT_IMAGES = 300
POOL_PROMPTS = 250  # prompts per fixture pool
CC12M_IMAGES = 40  # COCO-MINI images standing in for the CC12M bridge


def coco_captions(n: int) -> List[Tuple[int, List[str]]]:
    """``(COCO image id, its captions)`` of the first ``n`` Karpathy test images (file order)."""
    import json

    from capaudit.data.registry import fetch

    data = json.loads(fetch("coco_karpathy_captions", "test_captions.json").read_text(encoding="utf-8"))
    out = []
    for name, caps in data.items():
        if len(out) >= n:
            break
        out.append((int(name.rsplit("_", 1)[-1].split(".")[0]), [c.strip() for c in caps]))
    return out


def _key(image_id: int, normalization: str, reference: bool) -> str:
    if normalization == "url":
        url = f"http://images.cocodataset.org/val2014/COCO_val2014_{image_id:012d}.jpg"
        return url.replace("http://images.", "HTTP://IMAGES.") + "#fixture" if reference else url
    if normalization == "zfill9":
        return f"{image_id:09d}" if reference else str(image_id)
    return str(image_id)


def surface_frame(spec: Mapping[str, Any], index: int, images: Sequence[Tuple[int, List[str]]]):
    """The fixture rows of one hub surface (module docstring), as a pandas frame."""
    import pandas as pd

    caption_col = spec.get("caption_field") or "caption"
    key_col = spec.get("key_field") or "key"
    norm = str(spec.get("key_normalization", "str"))
    reference = str(spec["name"]).startswith("ref_")
    rows = [{key_col: _key(img, norm, reference), caption_col: caps[1 + index % (len(caps) - 1)] if reference else caps[0]}
            for k, (img, caps) in enumerate(images) if k % 10 != index % 10]
    return pd.DataFrame(rows, columns=[key_col, caption_col])


def diffusiondb_prompts() -> List[str]:
    """The DiffusionDB prompts of the ImageReward release (``refl_data.json``, field ``text``), in order."""
    import json

    from capaudit.data.registry import fetch

    rows = json.loads(fetch("imagereward_diffusiondb_prompts", "refl_data.json").read_text(encoding="utf-8"))
    return [str(r["text"]) for r in rows if isinstance(r, dict) and r.get("text")]


def hub_pool_sources(plan: Mapping[str, Any]) -> List[Mapping[str, Any]]:
    """The ``prompt_support`` pool sources of ``plan`` that stream from the Hub (``hub:``)."""
    ps = plan.get("prompt_support")
    prep = ((ps.get("pools") or {}).get("prepare") or {}) if isinstance(ps, Mapping) else {}
    return [s for s in prep.get("sources") or [] if isinstance(s, Mapping) and s.get("hub")]


def write_pool(spec: Mapping[str, Any], prompts: Sequence[str], data_dir: Path) -> Dict[str, Any]:
    """Write one fixture pool in its Hub dataset's format and field; the local source spec for it."""
    import json

    import pandas as pd

    from capaudit.prompts.pools import hub_pool
    from capaudit.data.registry import entry

    hub = hub_pool(spec, f"prompt_support.pools.prepare.sources[{spec['name']}]")
    fmt = entry("hf_prompt_pools", str(spec["hub"])).extra.get("format") or "parquet"
    path = (data_dir / f"pool_{spec['name']}.{fmt}").resolve()
    tmp = path.with_name(path.name + ".tmp")
    if fmt == "txt":
        tmp.write_text("".join(p.replace("\n", " ") + "\n" for p in prompts), encoding="utf-8")
    elif fmt == "jsonl":
        tmp.write_text("".join(json.dumps({hub.field: p}, ensure_ascii=False) + "\n" for p in prompts), encoding="utf-8")
    else:
        pd.DataFrame({hub.field: list(prompts)}).to_parquet(tmp, index=False)
    tmp.replace(path)
    local = {"name": spec["name"], "path": str(path), "format": fmt}
    if fmt != "txt":
        local["field"] = hub.field
    return local


def _first(value: Any) -> str:
    return str(value if isinstance(value, str) else list(value)[0])


def write_cc12m(section: Mapping[str, Any], data_dir: Path, n_images: int) -> Dict[str, Any]:
    """The fixture's CC12M surfaces and shards (module docstring); the ``cc12m:`` section for them."""
    import io
    import json
    import tarfile

    import pandas as pd

    from capaudit.data.coco import coco_mini

    images = [im for im in sorted(coco_mini(), key=lambda im: im.id)
              if im.path is not None and Path(im.path).is_file() and len(im.captions) >= 4][:n_images]
    if len(images) < 10:
        raise InputError(f"COCO-MINI holds {len(images)} usable images; the CC12M fixture needs 10")
    root = (data_dir / "cc12m").resolve()
    root.mkdir(parents=True, exist_ok=True)
    url_of = {im.id: f"http://images.cocodataset.org/{Path(im.path).parent.name}/{im.file_name}" for im in images}
    out = copy.deepcopy(dict(section))
    surfaces = []
    for i, spec in enumerate(section.get("surfaces") or []):
        rows = []
        for k, im in enumerate(images):
            if k == 1 + i:  # each surface leaves out one image of its own
                continue
            caps = sorted(im.captions, key=lambda c: c["id"])
            row = {_first(spec["caption"]): caps[i % len(caps)]["caption"].strip()}
            if spec.get("key"):
                row[str(spec["key"])] = str(im.id) if i % 2 == 0 else f"{im.id:09d}"
            if spec.get("url"):
                url = url_of[im.id]
                row[str(spec["url"])] = url.replace("images.cocodataset.org", "IMAGES.cocodataset.org") if i else url
            rows.append(row)
        path = root / f"{spec['name']}.parquet"
        tmp = path.with_name(path.name + ".tmp")
        pd.DataFrame(rows).to_parquet(tmp, index=False)
        tmp.replace(path)
        local = {k: v for k, v in spec.items() if k != "hub"}
        local["path"] = str(path)
        surfaces.append(local)
    out["surfaces"] = surfaces
    shard_dir = root / "wds"
    shard_dir.mkdir(exist_ok=True)
    held = images[: len(images) - max(1, len(images) // 10)]
    for s_i in range(2):
        path = shard_dir / f"{s_i:05d}.tar"
        tmp = path.with_name(path.name + ".tmp")
        with tarfile.open(tmp, "w") as tf:
            for k, im in enumerate(held):
                if k % 2 != s_i:
                    continue
                key = f"{s_i:05d}{k:04d}"
                for name, data in ((f"{key}.jpg", Path(im.path).read_bytes()),
                                   (f"{key}.json", json.dumps({"url": url_of[im.id], "key": key}).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
        tmp.replace(path)
    out["shards"] = str(shard_dir / "*.tar")
    out.pop("shards_hub", None)
    return out


def fixture_params(plan: Mapping[str, Any], files: Mapping[str, Path], out_root: Path,
                   pools: Mapping[str, Mapping[str, Any]] = {}, cc12m: Any = None) -> Dict[str, Any]:
    """The plan with hub surfaces → local files and endpoints → offline backends; its outputs go
    under ``out_root`` (beside the fixture data)."""
    out = copy.deepcopy(dict(plan))
    out["run"] = f"{plan.get('run', 'plan')}_fixture"
    out["out_root"] = str(out_root)
    surfaces = []
    for s in out.get("surfaces") or []:
        if isinstance(s, Mapping) and s.get("name") in files:
            local = {k: v for k, v in s.items() if k not in ("format", "hf_path", "split", "revision", "hf_name")}
            local.update({"format": "parquet", "file": str(files[s["name"]]), "caption_field": s.get("caption_field") or "caption",
                          "key_field": s.get("key_field") or "key"})
            surfaces.append(local)
        else:
            surfaces.append(s)
    out["surfaces"] = surfaces
    if cc12m is not None:
        out["cc12m"] = cc12m
    for src in hub_pool_sources(out):
        local = pools[str(src["name"])]
        src.clear()
        src.update(local)
    claims = out.get("claims")
    if isinstance(claims, dict):
        for k in ("url", "revision"):
            claims.pop(k, None)
        claims.update({"model": OFFLINE_EXTRACTOR, "concurrency": 8, "timeout": 240})
    sec = out.get("judges")
    if isinstance(sec, dict):
        for k in ("extractor_url", "extractor_revision"):
            sec.pop(k, None)
        sec.update({"extractor": OFFLINE_EXTRACTOR, "concurrency": 4, "timeout": 240})
        sec["judges"] = [{"name": "capaudit-offline-annotation-judge"}, {"name": "capaudit-offline-refcaption-judge"}]
        for sl in sec.get("slices") or []:  # the fixture's captions are COCO's, whatever the plan's surface
            for surf in sl.get("surfaces") or []:
                surf["label"] = f"{surf.get('label', surf.get('name'))} [fixture: COCO captions]"
    if isinstance(out.get("text_stats"), dict):
        out["text_stats"]["workers"] = 2
    if isinstance(out.get("prompt_support"), dict):
        out["prompt_support"]["workers"] = 1
    return out


def build(params: Path, out_dir: Path, images: int = DEFAULT_IMAGES) -> Path:
    """Write the fixture files and params (module docstring); returns the params path."""
    params = Path(params)
    try:
        plan = yaml.safe_load(params.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("params file not found", path=params) from None
    if not isinstance(plan, dict) or not isinstance(plan.get("surfaces"), list):
        raise InputError("a study plan needs a 'surfaces' list", path=params, field="surfaces")
    hub = [s for s in plan["surfaces"] if isinstance(s, Mapping) and s.get("format") == "hf"]
    if not hub:
        raise InputError("names no Hugging Face surface: nothing to stand in for", path=params, field="surfaces")
    data_dir = Path(out_dir) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    rows = coco_captions(images)
    files: Dict[str, Path] = {}
    for i, spec in enumerate(hub):
        path = (data_dir / f"{spec['name']}.parquet").resolve()
        tmp = path.with_suffix(".parquet.tmp")
        surface_frame(spec, i, rows).to_parquet(tmp, index=False)
        tmp.replace(path)
        files[str(spec["name"])] = path
    prompts = diffusiondb_prompts()
    pools = {str(spec["name"]): write_pool(spec, prompts[i * POOL_PROMPTS:(i + 1) * POOL_PROMPTS], data_dir)
             for i, spec in enumerate(hub_pool_sources(plan))}
    cc12m = write_cc12m(plan["cc12m"], data_dir, CC12M_IMAGES) if isinstance(plan.get("cc12m"), Mapping) else None
    out = Path(out_dir) / f"{plan.get('run', params.stem)}_fixture.yaml"
    header = (f"# Offline fixture of {params} (capaudit plan fixture): hub surfaces replaced by small local\n"
              f"# Parquet files of real COCO captions with the hub datasets' columns, hub prompt pools by local files of\n"
              f"# real DiffusionDB prompts in each pool's format, endpoints by offline backends.\n")
    out.write_text(header + yaml.safe_dump(fixture_params(plan, files, (Path(out_dir) / "outputs").resolve(), pools, cc12m), sort_keys=False, allow_unicode=True),
                   encoding="utf-8")
    return out


def register(subparsers: Any) -> None:
    """``capaudit plan fixture``."""
    p = subparsers.add_parser("plan", help="a study plan's offline fixture")
    sub = p.add_subparsers(dest="plan_command", metavar="PLAN_COMMAND")
    f = sub.add_parser("fixture", help="small local stand-ins for a plan's hub datasets and endpoints")
    f.add_argument("--params", default="params/paper.yaml")
    f.add_argument("--out", required=True, help="folder for the fixture data and params file")
    f.add_argument("--images", type=int, default=DEFAULT_IMAGES, help="COCO images per surface (before the left-out tenth)")
    f.set_defaults(func=_cmd_fixture)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _cmd_fixture(args: argparse.Namespace) -> int:
    if args.images < 10:
        raise InputError(f"--images must be >= 10, got {args.images}", field="images")
    out = build(Path(args.params), Path(args.out), args.images)
    print(f"capaudit plan fixture: {out} (run it: capaudit notebook run-all --params {out})", file=sys.stderr)
    return 0


__all__ = ["coco_captions", "diffusiondb_prompts", "write_cc12m", "hub_pool_sources", "write_pool", "surface_frame", "fixture_params",
           "build", "register"]
