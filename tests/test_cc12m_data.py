"""Inputs of the CC12M bridge tests, built from real COCO-MINI images and captions.

Four caption surfaces of the same COCO val2017 images, keyed the way the CC12M surfaces are:
``llava`` (the anchor: unpadded numeric key + URL, JSONL), ``qwen`` (zero-padded text key, Parquet),
``alttext`` (URL only, CSV; upper-case scheme and host, fragments), ``pixelprose`` (its own URL
column, JSONL; host case changed). Images 6..9 are deliberately broken in ways the reference does
*not* normalise (https, a trailing slash, a query string, a missing key), so the join keeps 0..5.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Dict, List, Sequence

import pandas as pd

from conftest import SHARED

COCO = SHARED / "data" / "coco_mini"
N_IMAGES = 12  # images 10 and 11 appear only in the shards (unrequested samples)
JOINED = range(6)


def coco_images() -> List[Dict]:
    """The first N_IMAGES val2017 images (sorted by id) with their five captions and file bytes."""
    d = json.loads((COCO / "annotations" / "captions_val2017.json").read_text())
    caps: Dict[int, List[str]] = {}
    for a in sorted(d["annotations"], key=lambda a: a["id"]):
        caps.setdefault(a["image_id"], []).append(a["caption"].strip())
    out = []
    for im in sorted(d["images"], key=lambda i: i["id"])[:N_IMAGES]:
        path = COCO / "val2017" / im["file_name"]
        out.append({"id": im["id"], "url": im["coco_url"], "captions": caps[im["id"]], "path": path,
                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return out


def shouty(url: str) -> str:
    """Upper-case scheme and host plus a fragment: the same image after normalisation."""
    scheme, rest = url.split("://", 1)
    host, path = rest.split("/", 1)
    return f"{scheme.upper()}://{host.upper()}/{path}#from-alt-text"


def write_surfaces(root: Path, images: Sequence[Dict]) -> Dict[str, Path]:
    """The four surfaces; returns name → file."""
    root.mkdir(parents=True, exist_ok=True)
    ims = list(images)[:10]
    llava = [{"key": str(im["id"]), "url": im["url"], "caption_llava": im["captions"][1]} for im in ims]
    llava.append({"key": str(ims[0]["id"]), "url": ims[0]["url"], "caption_llava": "a duplicate key row"})
    qwen = [{"key": str(im["id"]).zfill(9), "caption": im["captions"][2]} for im in ims if im is not ims[8]]
    qwen.append({"key": str(ims[1]["id"]), "caption": "a second qwen row of the same key (after padding)"})
    alt = []
    for i, im in enumerate(ims):
        url = shouty(im["url"])
        if i == 7:
            url = im["url"] + "/"
        if i == 9:
            url = im["url"] + "?size=large"
        alt.append({"url": url, "alt_text": im["captions"][0]})
    pixel = []
    for i, im in enumerate(ims):
        url = im["url"].replace("images.cocodataset.org", "Images.CocoDataset.ORG")
        if i == 6:
            url = url.replace("http://", "https://")
        row = {"key": f"pp{i}", "url": url, "vlm_caption": im["captions"][3]}
        if i == 2:  # blank first caption field: the next one is used
            row = {"key": f"pp{i}", "url": url, "vlm_caption": "  ", "caption": im["captions"][3]}
        pixel.append(row)
    files = {"llava": root / "llava.jsonl", "qwen": root / "qwen.parquet", "alttext": root / "alttext.csv",
             "pixelprose": root / "pixelprose.jsonl"}
    files["llava"].write_text("".join(json.dumps(r) + "\n" for r in llava))
    pd.DataFrame(qwen).to_parquet(files["qwen"])
    pd.DataFrame(alt).to_csv(files["alttext"], index=False)
    files["pixelprose"].write_text("".join(json.dumps(r) + "\n" for r in pixel))
    return files


def surface_args(files: Dict[str, Path]) -> List[str]:
    return ["--surface", f"llava={files['llava']},join=key,key=key,url=url,caption=caption_llava",
            "--surface", f"qwen={files['qwen']},join=key,key=key,caption=caption",
            "--surface", f"alttext={files['alttext']},join=url,url=url,caption=alt_text",
            "--surface", f"pixelprose={files['pixelprose']},join=url,url=url,caption=vlm_caption|caption,key=key"]


def member_key(image: Dict) -> str:
    return str(image["id"]).zfill(9)


def add_member(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def write_shards(root: Path, images: Sequence[Dict], *, corrupt: Sequence[int] = (),
                 without_json: Sequence[int] = ()) -> List[Path]:
    """Two WebDataset shards of the images (``<key>.jpg``, ``<key>.json`` with a shouty URL,
    ``<key>.txt``), alternating between shards, sidecar before or after the image."""
    root.mkdir(parents=True, exist_ok=True)
    paths = [root / "00000.tar", root / "00001.tar"]
    tars = [tarfile.open(p, "w") for p in paths]
    for i, im in enumerate(images):
        tf = tars[i % 2]
        key = member_key(im)
        data = im["path"].read_bytes()
        if i in corrupt:
            data = data[: len(data) // 3]
        sidecar = json.dumps({"url": shouty(im["url"]), "key": key}).encode()
        members = [(f"{key}.jpg", data), (f"{key}.txt", im["captions"][4].encode())]
        if i not in without_json:
            members.insert(0 if i % 3 == 0 else 2, (f"{key}.json", sidecar))
        for name, b in members:
            add_member(tf, name, b)
    for tf in tars:
        tf.close()
    return paths


def test_the_fixture_uses_the_stored_coco_files_unchanged() -> None:
    """The images' sha256 are the ones COCO-MINI's PROVENANCE lists (the tests compare against them)."""
    listed = {}
    for line in (COCO / "PROVENANCE.md").read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[0]) == 64:
            listed[parts[1]] = parts[0]
    images = coco_images()
    assert len(images) == N_IMAGES and len({im["url"] for im in images}) == N_IMAGES
    for im in images:
        assert listed[f"val2017/{im['path'].name}"] == im["sha256"]
        assert len(im["captions"]) == 5
