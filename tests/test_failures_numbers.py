"""Issue 16: numbers that carry no information are marked, counts of skipped rows are reported,
commands that would do nothing fail, and every error names what it is about.

Hand-checked values throughout (see each test's comment).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capaudit.cli import main
from capaudit.errors import InputError, OfflineError

REPO = Path(__file__).resolve().parents[1]
CAPAUDIT = REPO / ".venv" / "bin" / "capaudit"
EXE = [str(CAPAUDIT)] if CAPAUDIT.exists() else [sys.executable, "-m", "capaudit.cli"]


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------------------------------------
# text-stats: top-k prefix mass by construction, skipped rows, marginal gain quirk

def test_top_k_prefix_mass_marked_when_one_by_construction(tmp_path, capsys):
    src = _jsonl(tmp_path / "c.jsonl", [{"caption": f"caption number {i} of a red bus"} for i in range(5)])
    assert main(["text-stats", str(src), "--budgets", "4,64", "--top-k", "100", "--out", str(tmp_path / "o.json")]) == 0
    r = json.loads((tmp_path / "o.json").read_text())
    # 5 captions, 5 distinct prefixes <= top-100: mass 1.0 by construction, flagged and explained
    assert r["budgets"]["64"]["prefix_top_mass"] == {"raw": 1.0, "content": 1.0}
    assert r["prefix_top_mass_by_construction"]["64"] == {"raw": True, "content": True}
    assert any("B=64" in n and "1.0 by construction" in n for n in r["notes"])
    # top-2 of 5 distinct prefixes: 2/5, a real number, not flagged
    assert main(["text-stats", str(src), "--budgets", "64", "--top-k", "2", "--out", str(tmp_path / "o2.json")]) == 0
    r2 = json.loads((tmp_path / "o2.json").read_text())
    assert r2["budgets"]["64"]["prefix_top_mass"]["raw"] == pytest.approx(2 / 5)
    assert r2["prefix_top_mass_by_construction"]["64"] == {"raw": False, "content": False} and r2["notes"] == []
    # at B=4 the raw prefixes ("caption number 0 of") are all distinct too, but top-2 < 5: not flagged
    assert r["prefix_top_mass_by_construction"]["4"]["raw"] is True


def test_text_stats_skip_counts_reported(tmp_path, capsys):
    src = _jsonl(tmp_path / "c.jsonl", [{"caption": "a dog"}, {"text": "no caption"}, {"caption": ""},
                                        {"caption": None}, {"caption": "a cat"}])
    rc = main(["text-stats", str(src), "--caption-field", "caption", "--on-missing", "skip",
               "--out", str(tmp_path / "o.json")])
    assert rc == 0
    r = json.loads((tmp_path / "o.json").read_text())
    assert r["records"] == 2
    assert r["input"] == {"rows": 5, "rows_skipped": 3, "rows_missing_caption_field": 1, "rows_empty_caption": 2}
    assert "3 of 5 rows skipped (1 without the caption field, 2 with an empty or null caption)" in capsys.readouterr().err


def test_marginal_avg_token_gain_reference_quirk():
    """Reference: Δ of avg_budget_tokens already rounded to 2 decimals, over ΔB (§1.3)."""
    from capaudit.text.survey import SurveyConfig, survey_captions

    caps = [" ".join(["w"] * 20), " ".join(["w"] * 20), " ".join(["w"] * 21)]
    # avg at B=16: 16.0; at B=32: (20 + 20 + 21) / 3 = 20.3333...
    quirk = survey_captions(caps, SurveyConfig(budgets=(16, 32))).finalize()
    assert quirk["budgets"]["16"]["marginal_avg_token_gain"] is None
    assert quirk["budgets"]["32"]["marginal_avg_token_gain"] == pytest.approx((20.33 - 16.00) / 16)  # 0.270625
    exact = survey_captions(caps, SurveyConfig(budgets=(16, 32), marginal_gain_from_rounded=False)).finalize()
    assert exact["budgets"]["32"]["marginal_avg_token_gain"] == pytest.approx((61 / 3 - 16) / 16)  # 0.2708333
    assert SurveyConfig().marginal_gain_from_rounded is True  # on by default
    assert quirk["budgets"]["32"]["avg_budget_tokens"] == exact["budgets"]["32"]["avg_budget_tokens"]


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"top_k": -3}, {"budgets": (0, 16)}, {"budgets": (-64,)},
                                    {"ngram_orders": (0,)}, {"repeat_orders": ()}])
def test_survey_config_rejects_meaningless_settings(kwargs):
    from capaudit.text.survey import SurveyConfig

    with pytest.raises(ValueError):
        SurveyConfig(**kwargs)


def test_text_stage_params_rejected_with_key_named(tmp_path):
    from capaudit.errors import InputError
    from capaudit.text.params import TextStatsParams

    with pytest.raises(ValueError, match=r"text_stats\.top_k: expected a positive integer or a list of them, got 0"):
        TextStatsParams.from_section({"top_k": 0})
    with pytest.raises(ValueError, match=r"text_stats\.budgets"):
        TextStatsParams.from_section({"budgets": [64, -1]})
    with pytest.raises(InputError, match=r"^p\.yaml: text_stats\.budget: unknown key \(known: .*budgets"):
        TextStatsParams.from_section({"budget": 64}, "p.yaml")
    with pytest.raises(InputError, match=r"^p\.yaml: text_stats\.workers: expected an integer >= 1, got 'two'$"):
        TextStatsParams.from_section({"workers": "two"}, "p.yaml")


# ---------------------------------------------------------------------------------------------
# prompt support: one block is inconclusive; the comparison name does not come from the file name

def _support_inputs(tmp_path: Path, n_pairs: int):
    pairs = _jsonl(tmp_path / "pairs.jsonl", [{"local_caption": f"a red bus number {i} near the old station",
                                               "reference_caption": f"a dog {i}"} for i in range(n_pairs)])
    (tmp_path / "pool.txt").write_text("a red bus\nthe old station at night\na dog in a park\n")
    return pairs


def test_one_block_bootstrap_is_not_a_stable_direction(tmp_path, capsys):
    from capaudit.prompts.support import stable_direction

    pairs = _support_inputs(tmp_path, 6)
    rc = main(["prompt-support", "--pairs", str(pairs), "--pool", f"p={tmp_path / 'pool.txt'}", "--block-size", "10",
               "--reps", "50", "--out", str(tmp_path / "s.tsv")])
    assert rc == 0
    rows = (tmp_path / "s.tsv").read_text().splitlines()
    head = rows[0].split("\t")
    body = [dict(zip(head, r.split("\t"))) for r in rows[1:]]
    assert all(r["blocks"] == "1" and r["stable_direction"] == "inconclusive" for r in body)
    assert all(r["ci95_low"] == r["ci95_high"] for r in body)  # zero width by construction
    assert "only 1 block(s)" in capsys.readouterr().err
    # the same zero-width interval with two or more blocks would be labelled
    assert stable_direction("jsd", -0.1, -0.1, blocks=1) == "inconclusive"
    assert stable_direction("jsd", -0.1, -0.1, blocks=2) == "local_lower"


def test_comparison_name_and_intervals_do_not_depend_on_the_file_name(tmp_path, capsys):
    pairs = _support_inputs(tmp_path, 40)
    renamed = tmp_path / "renamed_copy.jsonl"
    renamed.write_bytes(pairs.read_bytes())
    outs = []
    for i, p in enumerate((pairs, renamed)):
        out = tmp_path / f"s{i}.tsv"
        assert main(["prompt-support", "--pairs", str(p), "--pool", f"p={tmp_path / 'pool.txt'}", "--block-size", "10",
                     "--reps", "200", "--out", str(out)]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    assert "\tlocal_caption_vs_reference_caption\t" in outs[0]
    # naming the surfaces names the comparison
    assert main(["prompt-support", "--pairs", str(pairs), "--pool", f"p={tmp_path / 'pool.txt'}", "--block-size", "10",
                 "--reps", "200", "--local-surface", "ours", "--reference-surface", "ref",
                 "--out", str(tmp_path / "s3.tsv")]) == 0
    assert "\tours_vs_ref\tours\tref\t" in (tmp_path / "s3.tsv").read_text()


def test_cli_defaults_match_the_modules_that_own_them():
    from capaudit.claims import cli as ccli
    from capaudit.claims import requests as creq
    from capaudit.cli import build_parser
    from capaudit.prompts import ngrams, support
    from capaudit.prompts.params import Comparison, PromptSupportParams

    # prompt-support options left out take the params class's defaults (the modules that own them)
    args = build_parser(["capaudit.prompts.cli"]).parse_args(["prompt-support", "--pairs", "p", "--pool", "a=b",
                                                              "--out", "o"])
    p = PromptSupportParams.from_args(args, [], Comparison("c", Path("p")), None)
    assert p == PromptSupportParams(comparisons=(Comparison("c", Path("p")),))
    assert (p.hash_buckets, p.alpha, p.budget) == (ngrams.HASH_BUCKETS, support.ALPHA, 64)
    from capaudit import prompt_sets

    assert (ccli.DEFAULT_MODEL, ccli.MAX_CAPTION_CHARS, ccli.WINDOW_MODES) == (
        creq.DEFAULT_MODEL, creq.MAX_CAPTION_CHARS, creq.WINDOW_MODES)
    assert (ccli.MAX_TOKENS, ccli.PROMPT_SETS, ccli.PROMPT_SETS[0]) == (
        creq.BuildParams("s").max_tokens, prompt_sets.PROMPT_SETS, prompt_sets.DEFAULT_PROMPT_SET)


# ---------------------------------------------------------------------------------------------
# claims: skipped rows counted, half-finished store reported

def test_claims_build_counts_skipped_rows(tmp_path, capsys):
    src = _jsonl(tmp_path / "c.jsonl", [{"caption": "a dog"}, {"text": "x"}, {"caption": " "}, {"caption": None},
                                        {"caption": 5}, {"caption": "a cat"}])
    out = tmp_path / "requests.jsonl"
    assert main(["claims", "build", "--input", str(src), "--surface", "s", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{src}:2 field 'caption'" in err and "--on-missing skip" in err and not out.exists()
    assert main(["claims", "build", "--input", str(src), "--surface", "s", "--on-missing", "skip",
                 "--out", str(out)]) == 0
    man = json.loads((tmp_path / "requests.manifest.json").read_text())
    assert man["counts"] == {"usable": 2, "emitted": 2, "rows": 6, "rows_missing_caption_field": 1,
                             "rows_empty_caption": 3}
    assert "4 skipped: 1 without the caption field, 3 empty or null" in capsys.readouterr().err


def test_claims_summarize_reports_unanswered_requests(tmp_path, capsys):
    src = _jsonl(tmp_path / "c.jsonl", [{"caption": f"a dog number {i}"} for i in range(4)])
    req = tmp_path / "requests.jsonl"
    assert main(["claims", "build", "--input", str(src), "--surface", "s", "--model", "m", "--out", str(req)]) == 0
    rows = [json.loads(x) for x in req.read_text().splitlines()]
    answered = [{"request_id": r["request_id"], "ok": True, "parsed": {"caption_id": r["input"]["caption_id"],
                 "claimed_units": [{"category": "object", "unit": "dog", "span": "dog", "target": "dog"}]}}
                for r in rows[:3]]
    _jsonl(tmp_path / "responses.jsonl", answered)  # one request still unanswered
    capsys.readouterr()
    out = tmp_path / "summary.json"
    assert main(["claims", "summarize", "--responses", str(tmp_path / "responses.jsonl"), "--out", str(out)]) == 0
    s = json.loads(out.read_text())
    assert s["input"]["requests_total"] == 4 and s["input"]["unanswered_requests"] == 1
    assert s["status"] == {"responses": 3, "captions": 3, "bad": 0}
    assert "1 of 4 requests have no response row yet" in capsys.readouterr().err
    assert main(["claims", "summarize", "--responses", str(tmp_path / "responses.jsonl"), "--out", str(out),
                 "--require-complete"]) == 4


# ---------------------------------------------------------------------------------------------
# slices, surfaces, offline, notebooks, decoding

def test_slice_reports_skipped_rows_and_refuses_an_empty_join(tmp_path, capsys):
    a = _jsonl(tmp_path / "a.jsonl", [{"id": 1, "caption": "a dog"}, {"id": 2, "caption": ""}, {"id": 3, "x": 1}])
    b = _jsonl(tmp_path / "b.jsonl", [{"id": 1, "caption": "a cat"}, {"id": 2, "caption": "a cow"}])
    rc = main(["slice", "--surface", f"a={a}:caption:id", "--surface", f"b={b}:caption:id", "--on-missing", "skip",
               "--out", str(tmp_path / "sl")])
    assert rc == 0
    assert "a: 1 records, 1 keys, 0 unmatched, 2 rows skipped" in capsys.readouterr().out
    c = _jsonl(tmp_path / "c.jsonl", [{"id": 9, "caption": "a cat"}])
    assert main(["slice", "--surface", f"a={a}:caption:id", "--surface", f"c={c}:caption:id", "--on-missing", "skip",
                 "--out", str(tmp_path / "sl")]) == 1
    err = capsys.readouterr().err
    assert "share no key" in err and "'1'" in err and "'9'" in err
    assert not (tmp_path / "sl" / "a_vs_c").exists()


def test_hf_surface_offline_fails_fast_naming_the_dataset(monkeypatch):
    from capaudit.surfaces import readers

    monkeypatch.setenv("CAPAUDIT_OFFLINE", "1")
    t0 = time.monotonic()
    with pytest.raises(OfflineError, match=r"hf:org/name\[train\].*'org/name'.*CAPAUDIT_OFFLINE.*hf_disk"):
        next(readers.read_hf("org/name"))
    assert time.monotonic() - t0 < 1.0
    monkeypatch.delenv("CAPAUDIT_OFFLINE")
    for var in readers.OFFLINE_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(readers, "_hub_reachable", lambda timeout=3.0: "no answer from huggingface.co:443 within 3 s")
    with pytest.raises(OfflineError, match="cannot be reached .*within 3 s"):
        next(readers.read_hf("org/name"))


def test_hub_probe_is_time_bounded(monkeypatch):
    """A resolver or connect that hangs (no timeout of its own) cannot hold the command up."""
    import socket

    from capaudit.surfaces import readers

    def hang(*args, **kwargs):
        time.sleep(3)
        raise OSError("gave up")

    monkeypatch.setattr(socket, "create_connection", hang)
    t0 = time.monotonic()
    why = readers._hub_reachable(timeout=0.5)
    assert why == "no answer from huggingface.co:443 within 0.5 s" and time.monotonic() - t0 < 2.0


def test_decoding_errors_name_file_line_and_byte(tmp_path):
    from capaudit.io.text import iter_text_lines, read_text_checked

    p = tmp_path / "x.txt"
    p.write_bytes(b"ok\r\nalso ok\r\nbad \xff here\n")
    with pytest.raises(InputError, match=r"x\.txt:3: not valid UTF-8 \(byte 0xff at column 5\)"):
        list(iter_text_lines(p))
    with pytest.raises(InputError, match=r"x\.txt:3: not valid UTF-8 \(byte 0xff at column 5\)"):
        read_text_checked(p)
    p.write_bytes(b"\xef\xbb\xbfa\r\nb\n")
    assert list(iter_text_lines(p)) == ["a\r\n", "b\n"] and read_text_checked(p) == "a\r\nb\n"


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["text-stats", "x.jsonl", "--top-k", "0"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["capaudit text-stats: error: argument --top-k: expected comma-separated positive integers, got '0' "
                   "(see 'capaudit text-stats --help')"]


def test_notebook_run_unknown_name_lists_known(tmp_path, capsys, monkeypatch):
    nb = tmp_path / "notebooks"
    nb.mkdir()
    (nb / "first.py").write_text('# %% tags=["parameters"]\nparams_path = "p.yaml"\n')
    (tmp_path / "p.yaml").write_text("run: t\nnotebooks: [first]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["notebook", "run", "nope", "--params", "p.yaml"]) == 1
    assert "unknown notebook nope; this run (p.yaml) has: first; notebooks/ has: first" in capsys.readouterr().err
    assert main(["notebook", "run", "--params", "p.yaml"]) == 1
    assert "name at least one notebook (known: first)" in capsys.readouterr().err


def test_failing_notebook_is_one_line_naming_notebook_and_cell(tmp_path):
    pytest.importorskip("papermill")
    nb = tmp_path / "notebooks"
    nb.mkdir()
    (nb / "bad.py").write_text('# %% tags=["parameters"]\nparams_path = "p.yaml"\n\n# %%\nx = 1\n\n'
                               '# %%\nraise ValueError("surface x is empty")\n')
    (tmp_path / "p.yaml").write_text(f"run: t\nnotebooks: [bad]\nout_root: {tmp_path / 'out'}\n")
    p = subprocess.run([*EXE, "notebook", "run", "bad", "--params", "p.yaml"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 1
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert err[0].startswith("capaudit notebook run: error: notebook 'bad' failed in cell")
    assert "ValueError: surface x is empty" in err[0] and "bad.failed.ipynb" in err[0]
    done = tmp_path / "out" / "t"
    assert (done / "notebooks" / "bad.failed.ipynb").exists() and not (done / "notebooks" / "bad.ipynb").exists()
    assert not (done / "stamps" / "bad.sha256").exists()


# ---------------------------------------------------------------------------------------------
# the class, not the instances: every registered command (including stages added later)

def _leaf_commands():
    import argparse

    from capaudit.cli import build_parser

    out = []

    def walk(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out.append(path)
            return
        for name, child in subs[0].choices.items():
            walk(child, path + [name])

    walk(build_parser(), [])
    return out


def test_every_command_reports_usage_errors_in_one_line(capsys):
    leaves = _leaf_commands()
    assert ["text-stats"] in leaves and ["claims", "build"] in leaves and ["llm", "run"] in leaves
    for path in leaves:
        with pytest.raises(SystemExit) as e:
            main([*path, "--no-such-option-xyz"])
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2, path
        assert len(err) == 1 and err[0].startswith(f"capaudit {' '.join(path)}: error:"), (path, err)


def test_unusual_valid_inputs_for_pools_and_claims(tmp_path, capsys):
    """CRLF, a BOM, a NUL inside a text and a very long line work in prompt-pools and claims build."""
    long = "a red bus near the station " * 4000
    (tmp_path / "p.txt").write_bytes(("\ufeffa red bus\r\na cat\x00on a mat\r\n" + long + "\r\n").encode("utf-8"))
    assert main(["prompt-pools", "prepare", "--source", f"p={tmp_path / 'p.txt'}", "--max-tokens", "100000",
                 "--out", str(tmp_path / "pools")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "pools" / "p.prompt_only.jsonl").read_text().splitlines()]
    assert [r["prompt"][:12] for r in rows] == ["a red bus", "a cat on a m", "a red bus ne"]  # BOM gone, NUL → space
    src = tmp_path / "c.jsonl"
    src.write_bytes(("\ufeff" + json.dumps({"caption": "a dog\u0000 on grass"}) + "\r\n"
                     + json.dumps({"caption": long}) + "\r\n").encode("utf-8"))
    assert main(["claims", "build", "--input", str(src), "--surface", "s", "--budget", "full",
                 "--out", str(tmp_path / "requests.jsonl")]) == 0
    reqs = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [r["input"]["caption"][:5] for r in reqs] == ["a dog", "a red"] and len(reqs[1]["input"]["caption"]) > 100000
