"""``capaudit cc12m bridge|manifest|materialize`` fail loudly and cleanly.

Same contract as the other batteries (:mod:`_battery`): non-zero exit, one stderr line naming the
file (row, field) or option, no traceback, no file created, changed or removed.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, Dict

import pytest

from _battery import Case, assert_fails_cleanly, run_cases, with_options
from test_cc12m_data import add_member, coco_images, member_key, write_shards, write_surfaces

LLAVA = "llava=in/llava.jsonl,join=key,key=key,url=url,caption=caption_llava"
QWEN = "qwen=in/qwen.parquet,join=key,key=key,caption=caption"
PIXEL = "pixelprose=in/pixelprose.jsonl,join=url,url=url,caption=vlm_caption|caption"
BRIDGE = ["cc12m", "bridge", "--surface", LLAVA, "--surface", QWEN, "--surface", PIXEL, "--out", "out/bridge"]
MANIFEST = ["cc12m", "manifest", "--joined", "ready/joined.jsonl", "--out", "out/m.jsonl"]
MAT = ["cc12m", "materialize", "--manifest", "ready/manifest.jsonl", "--shards", "shards", "--out", "out/mat"]


def _surfaces(llava: str = LLAVA) -> list:
    return ["cc12m", "bridge", "--surface", llava, "--surface", QWEN, "--surface", PIXEL, "--out", "out/bridge"]


def make_inputs(root: Path) -> None:
    from capaudit.cli import main

    images = coco_images()
    files = write_surfaces(root / "in", images)
    rows = [json.loads(x) for x in files["llava"].read_text().splitlines()]
    i = root / "in"
    nocap = [dict(r) for r in rows]
    del nocap[1]["caption_llava"]
    (i / "nocap.jsonl").write_text("".join(json.dumps(r) + "\n" for r in nocap))
    (i / "nokey.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "key"}) + "\n"
                                           for r in rows))
    (i / "broken.jsonl").write_text(json.dumps(rows[0]) + "\n{\"key\": oops}\n")
    (i / "noid.jsonl").write_text(json.dumps({"url": images[0]["url"], "caption_x": "a"}) + "\n")
    ready = root / "ready"
    ready.mkdir()
    assert main(["cc12m", "bridge", "--surface", LLAVA.replace("in/", f"{i}/"), "--surface",
                 QWEN.replace("in/", f"{i}/"), "--surface", PIXEL.replace("in/", f"{i}/"), "--out", str(ready)]) == 0
    assert main(["cc12m", "manifest", "--joined", str(ready / "joined.jsonl"), "--out", str(ready / "manifest.jsonl")]) == 0
    m = [json.loads(x) for x in (ready / "manifest.jsonl").read_text().splitlines()]
    (ready / "no_url.jsonl").write_text("".join(json.dumps({**r, "normalized_url": None if n == 2 else r["normalized_url"]})
                                                + "\n" for n, r in enumerate(m)))
    (ready / "unknown_member.jsonl").write_text("".join(
        json.dumps({**r, "shard": "00000.tar", "member": "999.jpg"} if n == 1 else r) + "\n" for n, r in enumerate(m)))
    ids = {r["image_id"] for r in m}
    wanted = [im for im in images if member_key(im) in ids]
    assert len(wanted) == 8  # without the alt-text surface, images 7 and 9 join too
    write_shards(root / "shards", wanted)
    write_shards(root / "few", wanted[:3])
    write_shards(root / "corrupt", wanted, corrupt=[3])
    (root / "notatar").mkdir()
    (root / "notatar" / "00000.tar").write_text("this is no tar\n")
    (root / "badjson").mkdir()
    with tarfile.open(root / "badjson" / "00000.tar", "w") as tf:
        add_member(tf, "000000001.jpg", wanted[0]["path"].read_bytes())
        add_member(tf, "000000001.json", b"{not json")
    o = root / "out"
    o.mkdir()
    (o / "afile").write_text("x\n")


CASES = [
    # --- bridge
    Case("bridge-missing-caption", _surfaces(LLAVA.replace("llava.jsonl", "nocap.jsonl")),
         ["in/nocap.jsonl: line 2", "field 'caption_llava'", "--skip-incomplete"]),
    Case("bridge-missing-key", _surfaces(LLAVA.replace("llava.jsonl", "nokey.jsonl")),
         ["in/nokey.jsonl: line 1", "field 'key'"]),
    Case("bridge-malformed-jsonl", _surfaces(LLAVA.replace("llava.jsonl", "broken.jsonl")),
         ["in/broken.jsonl", "line 2", "not valid JSON"]),
    Case("bridge-surface-not-found", _surfaces(LLAVA.replace("llava.jsonl", "nope.jsonl")), ["in/nope.jsonl", "not found"]),
    Case("bridge-glob-matches-nothing", _surfaces(LLAVA.replace("llava.jsonl", "nope*.jsonl")),
         ["in/nope*.jsonl", "no file matches"]),
    Case("bridge-spec-without-join", _surfaces("llava=in/llava.jsonl,key=key,caption=caption_llava"),
         ["--surface", "join=key or join=url"]),
    Case("bridge-spec-bad-option", _surfaces(LLAVA + ",colour=red"), ["--surface", "'colour=red'"]),
    Case("bridge-anchor-unknown", with_options(BRIDGE, anchor="gemini"), ["--anchor 'gemini'", "llava, qwen"]),
    Case("bridge-anchor-joins-by-url", with_options(BRIDGE, anchor="pixelprose"), ["--anchor 'pixelprose'", "join=key"]),
    Case("bridge-anchor-without-url", _surfaces(LLAVA.replace(",url=url", "")), ["--anchor 'llava'", "url=FIELD"]),
    Case("bridge-one-surface", ["cc12m", "bridge", "--surface", LLAVA, "--out", "out/bridge"], ["at least two"]),
    Case("bridge-bad-key-normalization", with_options(BRIDGE, key_normalization="zfill7"), ["--key-normalization"]),
    Case("bridge-max-rows-zero", with_options(BRIDGE, max_rows=0), ["--max-rows"]),
    Case("bridge-out-is-a-file", with_options(BRIDGE, out="out/afile"), ["out/afile", "file"]),
    # --- manifest
    Case("manifest-joined-not-found", with_options(MANIFEST, joined="ready/nope.jsonl"), ["ready/nope.jsonl", "not found"]),
    Case("manifest-row-without-image-id", with_options(MANIFEST, joined="in/noid.jsonl"),
         ["in/noid.jsonl: line 1", "field 'image_id'"]),
    Case("manifest-out-suffix", with_options(MANIFEST, out="out/m.csv"), ["out/m.csv", ".jsonl or .parquet"]),
    Case("manifest-shards-not-a-tar", with_options(MANIFEST, shards="notatar"), ["notatar/00000.tar", "tar shard"]),
    # --- materialize
    Case("materialize-images-missing", with_options(MAT, shards="few"),
         ["5 of 8 requested images", "ready/manifest.jsonl: line", "--allow-missing"]),
    Case("materialize-corrupt-image", with_options(MAT, shards="corrupt"),
         ["corrupt/00001.tar: member", "does not decode", "nothing was written"]),
    Case("materialize-unknown-member", with_options(MAT, manifest="ready/unknown_member.jsonl"),
         ["ready/unknown_member.jsonl: line 2", "field 'member'", "'999.jpg'"]),
    Case("materialize-row-without-url", with_options(MAT, manifest="ready/no_url.jsonl"),
         ["ready/no_url.jsonl: line 3", "field 'normalized_url'"]),
    Case("materialize-shards-not-found", with_options(MAT, shards="nowhere"), ["nowhere", "not found"]),
    Case("materialize-not-a-tar", with_options(MAT, shards="notatar"), ["notatar/00000.tar", "tar shard"]),
    Case("materialize-sidecar-not-json", with_options(MAT, shards="badjson"),
         ["badjson/00000.tar", "'000000001.json'", "not JSON"]),
    Case("materialize-bad-naming", with_options(MAT, naming="md5"), ["--naming", "md5"]),
    Case("materialize-out-is-a-file", with_options(MAT, out="out/afile"), ["out/afile", "file"]),
]


@pytest.fixture(scope="module")
def battery(tmp_path_factory) -> Dict[str, Any]:
    return run_cases(CASES, tmp_path_factory.mktemp("battery_cc12m"), make_inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fails_loudly_and_cleanly(case: Case, battery) -> None:
    assert_fails_cleanly(case, battery[case.id])


def test_the_battery_base_commands_succeed(tmp_path: Path) -> None:
    """Each case changes one thing of a command that works: the bases themselves exit 0."""
    from _battery import run_cli

    make_inputs(tmp_path)
    for base in (BRIDGE, MANIFEST, MAT):
        p = run_cli(base, tmp_path)
        assert p.returncode == 0, (base, p.stderr)
