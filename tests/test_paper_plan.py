"""params/paper.yaml, the published study as one run: refused in seconds where the Hub and the
endpoints are unreachable; its offline fixture runs the same plan end to end from raw rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from capaudit.config import load_config
from capaudit.errors import InputError
from capaudit.preflight import needs, unreachable

REPO = Path(__file__).resolve().parents[1]
PLAN = REPO / "params" / "paper.yaml"


def _cli(*args: str, env: dict = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capaudit.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_the_plan_names_the_seven_comparisons_the_judges_and_the_pools() -> None:
    plan = yaml.safe_load(PLAN.read_text(encoding="utf-8"))
    fair = json.loads((Path(os.environ.get("CAPAUDIT_DATA_DIR", REPO.parent / "shared" / "data")).parent / "reference"
                       / "configs" / "caption_survey" / "fair_slices.json").read_text(encoding="utf-8"))
    published = {(c["name"], c["local_surface"], c["reference_surface"]) for c in fair["comparisons"]}
    assert {(s["name"], s["local"], s["reference"]) for s in plan["slices"]} == published
    assert all((s["n"], s["seed"]) == (1000000, 0) for s in plan["slices"])
    assert plan["claims"]["prompts"] == "reference" and plan["claims"]["max_tokens"] == 4096
    assert {j["model"] for j in plan["judges"]["judges"]} == {"Qwen/Qwen3.5-397B-A17B-FP8", "google/gemma-4-31B-it"}
    assert plan["judges"]["prompts"] == "reference" and plan["judges"]["extractor"] == plan["claims"]["model"]
    cc = plan["cc12m"]  # the reference's four-caption bridge: LLaVA-NeXT anchors, PixelProse meets it by URL
    assert (cc["anchor"], cc["max_rows"], cc["seed"], cc["key_normalization"]) == ("ref_cc12m_llavanext", 5000, 0, "zfill9")
    assert {s["name"]: s["join"] for s in cc["surfaces"]} == {"ref_cc12m_llavanext": "key", "ours_cc12m": "key",
                                                             "ref_cc12m_qwen3vl8b": "key", "ref_pixelprose_cc12m": "url"}
    (judged,) = plan["judges"]["slices"]
    assert {s["name"] for s in judged["surfaces"]} == {s["name"] for s in cc["surfaces"]}
    ps = plan["prompt_support"]
    assert len(ps["paper_pools"]) == 7 and "sd_prompts_dedup_xzuyn" not in ps["paper_pools"]
    from capaudit.data.registry import entry

    hub_pools = [s["hub"] for s in ps["pools"]["prepare"]["sources"]]
    assert set(hub_pools) == set(ps["paper_pools"]) | {"sd_prompts_dedup_xzuyn"}  # the reference's eight (§3.1)
    for pool in hub_pools:
        assert entry("hf_prompt_pools", pool).kind == "hf"
    assert [c["slice"] for c in ps["comparisons"]] == [s["name"] for s in plan["slices"]]
    assert (ps["budget"], ps["ngram"], ps["block_size"], ps["reps"], ps["seed"]) == (64, 2, 5000, 2000, 0)
    hub = {s["hf_path"] for s in plan["surfaces"]}
    assert {entry("hf_released", f"ours_{f}").repository for f in ("cc12m", "laion_pop", "pd12m", "danbooru", "datacomp")} <= hub


def test_unreachable_hub_and_endpoints_stop_the_run_in_seconds(tmp_path: Path) -> None:
    cfg = load_config(PLAN)
    items = needs(cfg)
    assert {n.kind for n in items} == {"hub", "endpoint"}
    assert {n.target for n in items if n.where.startswith("prompt_support")} >= {"andyyang/stable_diffusion_prompts_2m",
                                                                                 "Falah/1M_SDXL_Refiner_Prompts"}
    start = time.monotonic()
    r = _cli("notebook", "run-all", "--params", str(PLAN), env={"HF_HUB_OFFLINE": "1"}, timeout=120)
    took = time.monotonic() - start
    assert r.returncode != 0 and took < 30, (r.returncode, took)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "cannot run here: unreachable" in lines[0] and "HF_HUB_OFFLINE is set" in lines[0]
    assert "claims.url http://127.0.0.1:8000" in lines[0]
    assert not (REPO / "outputs" / "paper" / "logs").exists()


def test_preflight_passes_a_reachable_endpoint(tmp_path: Path) -> None:
    from capaudit.llm.server import background_server

    with background_server(["capaudit-heuristic-extractor"]) as url:
        (tmp_path / "p.yaml").write_text(f"run: p\nnotebooks: []\nclaims: {{url: '{url}'}}\n", encoding="utf-8")
        assert unreachable(needs(load_config(tmp_path / "p.yaml")), timeout=5) == []
    with pytest.raises(InputError, match="claims.url"):
        from capaudit.preflight import check

        check(load_config(tmp_path / "p.yaml"), timeout=2)


@pytest.mark.slow
def test_the_fixture_runs_the_plan_end_to_end(tmp_path: Path) -> None:
    r = _cli("plan", "fixture", "--params", str(PLAN), "--out", str(tmp_path / "fx"), "--images", "120")
    assert r.returncode == 0, r.stderr
    params = tmp_path / "fx" / "paper_fixture.yaml"
    fx = yaml.safe_load(params.read_text(encoding="utf-8"))
    plan = yaml.safe_load(PLAN.read_text(encoding="utf-8"))
    assert fx["slices"] == plan["slices"] and fx["text_stats"]["budgets"] == plan["text_stats"]["budgets"]
    for s, p in zip(fx["surfaces"], plan["surfaces"]):  # same columns as the hub dataset
        cols = list(pd.read_parquet(s["file"]).columns)
        assert cols == [p["key_field"], p.get("caption_field") or "caption"]
    r = _cli("notebook", "run-all", "--params", str(params))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "fx" / "outputs" / "paper_fixture"
    slices = pd.read_csv(out / "tables" / "slices.csv")
    assert len(slices) == 7 and (slices["matched"] == 96).all()  # 120 images, a different tenth left out per side
    deltas = json.loads((out / "artifacts" / "tables" / "text_paired_deltas.json").read_text(encoding="utf-8"))
    assert len({json.dumps(r.get("comparison") or r.get("slice"), sort_keys=True) for r in _rows(deltas)}) == 7
    claimed = json.loads((out / "artifacts" / "claims" / "claimed_cbu_summary.json").read_text(encoding="utf-8"))
    assert set(claimed["surfaces"]) >= {s["name"] for s in plan["claims"]["surfaces"]}
    # prompt support: the hub pools (as local files of their formats) against the seven slices
    for src in fx["prompt_support"]["pools"]["prepare"]["sources"]:
        assert "hub" not in src and Path(src["path"]).suffix.lstrip(".") == entry_format(src["name"])
    wins = pd.read_csv(out / "tables" / "prompt_pool_wins.csv")
    assert sorted(wins["comparison"]) == sorted(s["name"] for s in plan["slices"]) and (wins["pools"] == 7).all()
    tsv = pd.read_csv(out / "artifacts" / "prompt_support" / "prompt_support.tsv", sep="\t")
    assert set(tsv["prompt_pool"]) == {s["hub"] for s in plan["prompt_support"]["pools"]["prepare"]["sources"]}
    assert (tsv["records"] == 96).all()  # every matched pair of each slice, one partial block
    for c in plan["slices"]:  # the slice's roles name the surfaces
        rows = tsv[tsv["comparison"] == c["name"]]
        assert set(rows["local_surface"]) == {c["local"]} and set(rows["reference_surface"]) == {c["reference"]}
    for name in ("text_stats", "text_paired_deltas", "prompt_pool_wins", "claims_summary", "vqa_mean_std",
                 "vqa_by_type", "judges_summary", "cc12m_denominators"):
        assert (out / "tables" / f"{name}.tex").is_file(), name
    for name in ("claims_summary", "judges_summary"):  # tables name the model-facing text, from the requests
        notes = json.loads((out / "tables" / f"{name}.table.json").read_text(encoding="utf-8"))["notes"]
        assert "prompt: the reference study's own (reference:" in notes[0], (name, notes)
    # the CC12M case study from raw rows: bridge (each surface leaves out one image), shards (a tenth absent)
    cc = json.loads((out / "artifacts" / "cc12m" / "cc12m_summary.json").read_text(encoding="utf-8"))
    assert cc["joined"] == 36 and cc["located"] == {"located": 32, "not_located": 4}  # 40 images, 4 each left out
    assert (cc["materialize"]["materialized"], cc["materialize"]["missing"]) == (32, 4)
    assert {s: c["rows"] for s, c in cc["materialize"]["caption_files"].items()} == {s["name"]: 32 for s in plan["cc12m"]["surfaces"]}
    vqa = pd.read_csv(out / "tables" / "vqa_mean_std.csv")
    assert len(vqa) == 4 and set(vqa["slice"]) == {"CC12M"} and vqa["label" if "label" in vqa else "surface"].str.contains("fixture").all()


def entry_format(pool: str) -> str:
    from capaudit.data.registry import entry

    return entry("hf_prompt_pools", pool).extra["format"]


def _rows(table: dict) -> list:
    return table.get("rows") or table.get("data") or []


def test_the_plans_human_study_is_the_references() -> None:
    from capaudit.human.protocol import StudyConfig

    plan = yaml.safe_load(PLAN.read_text(encoding="utf-8"))
    ref = yaml.safe_load((Path(os.environ.get("CAPAUDIT_DATA_DIR", REPO.parent / "shared" / "data")).parent / "reference"
                          / "configs" / "eval" / "human_cbu_cc12m.yaml").read_text(encoding="utf-8"))["study"]
    cfg = StudyConfig.from_mapping(plan["human"], str(PLAN))
    assert (cfg.study_id, cfg.protocol, cfg.mode) == (ref["id"], ref["protocol_version"], "real")
    assert (cfg.seed, cfg.token_budget, cfg.claims_per_stratum, cfg.repeat_fraction, cfg.labels_per_item) == \
        (ref["seed"], ref["token_budget"], ref["claims_per_stratum"], ref["repeat_fraction"], ref["required_labels_per_item"])
    assert (cfg.participants, cfg.target_items, cfg.extension_batch, cfg.max_items, cfg.overlap_per_stratum) == \
        (ref["primary_participant_count"], ref["target_items_per_participant"], ref["optional_extension_batch_size"],
         ref["optional_extension_max_items"], ref["overlap_target_items_per_stratum"])
    r = ref["readiness"]
    assert (cfg.readiness.min_substantive, cfg.readiness.min_per_type, cfg.readiness.min_per_stratum,
            cfg.readiness.bootstrap_resamples, cfg.readiness.bootstrap_seed) == \
        (r["minimum_substantive_overall"], r["minimum_substantive_per_type"], r["minimum_substantive_per_stratum"],
         r["required_bootstrap_resamples"], r["required_bootstrap_seed"])
    assert cfg.consent_version == ref["consent_version"] and cfg.surface_groups == ref["surface_groups"]
