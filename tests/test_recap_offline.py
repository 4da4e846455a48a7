"""``capaudit-offline-coco-captioner`` on COCO-MINI images (captions checked by hand against the
images and their instance annotations), its failures, and the recap stage end to end."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
import yaml
from PIL import Image

from capaudit.config import load_config
from capaudit.data.coco import coco_mini
from capaudit.llm.backends import get_backend
from capaudit.llm.server import background_server
from capaudit.paper.stage_tables import render_stage_tables
from capaudit.recap import stage as recap_stage
from capaudit.recap.export import collect
from capaudit.recap.inputs import open_images
from capaudit.standins.captioner import OFFLINE_NAME, OFFLINE_VERSION, UnknownImage, compose, count_phrase, position
from capaudit.recap.policies import load_policy
from capaudit.recap.preprocess import preprocess_bytes
from capaudit.recap.runner import recap
from capaudit.surfaces import load_surface

POLICIES = Path(__file__).resolve().parents[1] / "params" / "policies"

# Checked by hand: 000000000802 is a portrait kitchen photo, a refrigerator filling the right third
# (box 245,185 166x356 of 424x640: 21.75 % of the frame, centre in the middle row) and an oven on
# the left (centre x 96/424 = left third).
KITCHEN_DETAILED = ("A refrigerator is on the right, covering about 22% of the frame. Around it is an oven on the "
                    "left. The frame is in portrait orientation.")
KITCHEN_PLAIN = "This image shows an oven and a refrigerator."
# 000000000139: a living room; two "tv" boxes (the TV left, the fireplace right, both in the middle
# row) are the largest category (14,155 + 6,399 px²; the larger is 5.2 % of 640x426); chairs and
# table in the centre; the standing woman's box centre is at x = 0.69 (right third); the big vase
# at the bottom right dominates the four vases; the rest are small.
LIVING_DETAILED = (
    "Two TVs are spread across the middle of the frame, the largest covering about 5% of the frame. Around them are "
    "five chairs in the center, a dining table in the center, two people on the right, four vases at the bottom "
    "right and a refrigerator on the right. Smaller objects include a potted plant, two books, a clock and a "
    "microwave. The frame is in landscape orientation.")
LIVING_PLAIN = ("This image shows two people, five chairs, a potted plant, a dining table, two TVs, a microwave, a "
                "refrigerator, two books, a clock and four vases.")
# 000000034417: a doughnut factory behind glass; six workers along the top; 13 annotated doughnuts
# on the conveyor at the left; one crowd region of doughnuts (not counted) across the centre.
DONUTS_DETAILED = (
    "Six people are spread across the top of the frame, the largest covering about 2% of the frame. Around them are "
    "13 donuts on the left and a tie at the top right. A dense group of donuts also appears in the center. The frame "
    "is in landscape orientation.")


@pytest.fixture(scope="module")
def coco():
    return coco_mini()


def _data_url(img) -> str:
    return preprocess_bytes(Path(img.path).read_bytes())[0]


def test_compose_hand_checked(coco):
    names = coco.category_names
    assert compose(coco.images[802], names, "detailed") == KITCHEN_DETAILED
    assert compose(coco.images[802], names, "plain") == KITCHEN_PLAIN
    assert compose(coco.images[139], names, "detailed") == LIVING_DETAILED
    assert compose(coco.images[139], names, "plain") == LIVING_PLAIN
    assert compose(coco.images[34417], names, "detailed") == DONUTS_DETAILED
    # crowd regions are never counted
    assert compose(coco.images[34417], names, "plain") == "This image shows six people, a tie and 13 donuts."


def test_words_and_positions():
    assert [count_phrase(c, n) for c, n in [("person", 1), ("person", 2), ("skis", 3), ("bus", 2), ("umbrella", 1),
                                            ("wine glass", 2), ("tv", 14), ("sheep", 1), ("knife", 4)]] == [
        "a person", "two people", "three pairs of skis", "two buses", "an umbrella", "two wine glasses", "14 TVs",
        "a sheep", "four knives"]
    assert position([(0, 0, 10, 10)], 90, 90) == "at the top left"
    assert position([(40, 40, 10, 10)], 90, 90) == "in the center"
    assert position([(70, 40, 10, 10)], 90, 90) == "on the right"
    assert position([(40, 80, 10, 10)], 90, 90) == "at the bottom"
    assert position([(0, 80, 10, 10), (80, 80, 10, 10)], 90, 90) == "spread across the bottom of the frame"
    assert position([(0, 0, 10, 10), (80, 80, 10, 10)], 90, 90) == "spread across the frame"
    # not reaching both sides: the area-weighted centre decides (big box in the centre wins)
    assert position([(0, 0, 5, 5), (35, 35, 20, 20)], 90, 90) == "in the center"


def test_backend_finds_the_image_and_follows_the_policy(coco):
    fn = get_backend(OFFLINE_NAME)  # registered when capaudit.standins.captioner is imported
    img = coco.images[802]
    photo, naive, anime = (load_policy(n, POLICIES) for n in ("photorealistic", "naive", "anime-booru"))
    url = _data_url(img)  # re-encoded JPEG: found by its thumbnail, not its bytes
    assert fn(photo.messages(url), {}) == KITCHEN_DETAILED
    assert fn(naive.messages(url), {}) == KITCHEN_PLAIN
    assert fn(anime.messages(url, {"rating": "g"}), {}) == KITCHEN_DETAILED
    original = "data:image/jpeg;base64," + base64.b64encode(Path(img.path).read_bytes()).decode()
    assert fn(naive.messages(original), {}) == KITCHEN_PLAIN  # sha256 of the file's bytes
    assert fn(photo.messages(Path(img.path).resolve().as_uri()), {}) == KITCHEN_DETAILED  # file name
    # an unknown prompt: a system message means detailed, none means plain
    assert fn([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}], {}) == KITCHEN_PLAIN


def test_unknown_images_fail_honestly(coco):
    fn = get_backend(OFFLINE_NAME)
    pol = load_policy("photorealistic", POLICIES)
    mirrored = Image.open(coco.images[802].path).transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    buf = io.BytesIO()
    mirrored.save(buf, "JPEG", quality=90)
    with pytest.raises(UnknownImage, match="not a COCO-MINI image"):
        fn(pol.messages("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()), {})
    with pytest.raises(UnknownImage, match="file cat.jpg is not a COCO-MINI image"):
        fn(pol.messages("file:///tmp/cat.jpg"), {})
    with pytest.raises(UnknownImage, match="data: and file://"):
        fn(pol.messages("https://example.com/x.jpg"), {})


def test_runner_with_offline_backend_through_capaudit_serve(tmp_path: Path, coco):
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for iid in (802, 139):
        (imgs / coco.images[iid].file_name).write_bytes(Path(coco.images[iid].path).read_bytes())
    Image.new("RGB", (64, 48), (200, 30, 30)).save(imgs / "not_coco.png")
    with background_server([OFFLINE_NAME]) as url:
        st = recap([open_images(imgs)], load_policy("photorealistic", POLICIES), tmp_path / "st", [url], OFFLINE_NAME,
                   revision=OFFLINE_VERSION, workers=0, progress=False, handle_signals=False)
    assert (st.answered, st.failed, st.failed_by_kind) == (2, 1, {"http": 1})
    rows, failures = collect(tmp_path / "st")
    assert {r["image_id"]: r["caption"] for r in rows} == {"000000000802": KITCHEN_DETAILED,
                                                           "000000000139": LIVING_DETAILED}
    assert {r["model"] for r in rows} == {OFFLINE_NAME} and {r["backend"] for r in rows} == {"offline"}
    assert {r["usage_unit"] for r in rows} == {"words"}
    assert [f["image_id"] for f in failures] == ["not_coco"]
    assert failures[0]["reason"].startswith("HTTP 400") and "not a COCO-MINI image" in failures[0]["reason"]


def test_stage_two_policies_resumable(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = {"run": "rt", "recap": {
        "model": OFFLINE_NAME, "policies": ["photorealistic", "naive"], "policies_dir": str(POLICIES),
        "inputs": [{"dataset": "coco_mini", "path": "val2017"}], "surface_prefix": "recap_coco_mini",
        "limit": 6, "workers": 1, "concurrency": 4, "examples": 2}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    cfg = load_config(tmp_path / "p.yaml")
    out = recap_stage.run(cfg)
    t = out["table"].set_index("policy")
    assert t.loc["photorealistic", "captioned"] == 6 and t.loc["naive", "captioned"] == 6
    assert t.loc["photorealistic", "mean_words"] > t.loc["naive", "mean_words"]  # detailed vs plain composition
    assert set(t["backend"]) == {"capaudit-offline-coco-captioner (offline, composed from COCO annotations)"}
    assert list(out["examples"].columns) == ["photorealistic", "naive"] and len(out["examples"]) == 2
    art = tmp_path / "outputs" / "rt" / "artifacts" / "recap"
    for name in ("recap_coco_mini_photorealistic", "recap_coco_mini_naive"):
        for ext in ("jsonl", "parquet"):
            spec = {"name": name, "file": f"outputs/rt/artifacts/recap/{name}.{ext}", "format": ext,
                    "caption_field": "caption", "key_field": "image_id", "image_field": "image_path"}
            assert len(load_surface(spec)) == 6
    dirs = cfg.dirs()
    assert not (dirs["tables"] / "recap_summary.tex").exists()  # the stage writes rows; the paper renders them
    render_stage_tables(dirs["artifacts"], dirs["tables"], run_dir=cfg.out_dir)
    tex = (dirs["tables"] / "recap_summary.tex").read_text().splitlines()
    assert "offline" in tex[0] and tex[3].startswith(r"recap\_coco\_mini\_photorealistic & photorealistic & $6$ & $0$ & $")
    frag = json.loads((tmp_path / "outputs" / "rt" / "artifacts" / "numbers" / "recap.json").read_text())
    assert frag["backend"].startswith(OFFLINE_NAME) and frag["numbers"]["RecapCaptionedImages"] == {
        "value": 6, "format": "int", "description": f"images captioned under photorealistic ({frag['backend']})"}
    assert out["manifest"]["surfaces_yaml"][1]["file"] == "outputs/rt/artifacts/recap/recap_coco_mini_naive.jsonl"
    again = recap_stage.run(cfg)  # resumable: nothing asked twice
    assert again["table"]["asked_this_run"].tolist() == [0, 0]
    assert again["table"]["answered_earlier"].tolist() == [6, 6]
