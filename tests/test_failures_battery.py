"""Every command fails loudly and cleanly (issue 16): a battery of bad inputs through the real CLI.

Each case runs ``.venv/bin/capaudit ...`` in a scratch folder holding small inputs and asserts:
exit status != 0; exactly one line on stderr; that line names the file (and the line or field,
where one applies); no "Traceback"; and no file in the scratch folder was created, changed or
removed (sizes, mtimes and sha256 compared before and after). Valid but unusual inputs (CRLF, a
UTF-8 BOM, NUL bytes inside a caption, very long lines) must work.

Commands whose import pulls in the model-call layer (``claims``, ``llm``) are slower to start, so
the battery keeps those cases few. The whole file runs in well under a minute on 2 cores.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from _battery import EXE, REPO, Case, assert_fails_cleanly, run_cases, run_cli
from _battery import jsonl as _jsonl


# ---------------------------------------------------------------------------------------------
# scratch folder, snapshots, running

CAPTIONS = [{"id": i, "caption": f"A photo of {n} red bus number {i} on a street near the old station."}
            for i, n in enumerate(["one", "two", "three", "four", "five", "six"])]


def make_inputs(root: Path) -> None:
    """Small inputs, good and bad, shared by all cases (created once per test)."""
    i = root / "in"
    i.mkdir()
    (i / "good.jsonl").write_text(_jsonl(CAPTIONS))
    (i / "other.jsonl").write_text(_jsonl([{"id": r["id"], "caption": r["caption"].upper()} for r in CAPTIONS]))
    (i / "empty.jsonl").write_text("")
    (i / "blank.jsonl").write_text("\n\n")
    (i / "iiw_like.jsonl").write_text(_jsonl([{"image/key": "a", "IIW": "A long human description."},
                                              {"image/key": "b", "IIW": "Another one."}]))
    (i / "some_missing.jsonl").write_text(_jsonl([{"caption": "a dog"}, {"text": "no caption here"},
                                                  {"caption": "a cat"}]))
    (i / "all_empty.jsonl").write_text(_jsonl([{"caption": ""}, {"caption": None}, {"caption": "   "}]))
    (i / "malformed.jsonl").write_text('{"caption": "ok"}\n{"caption": oops}\n')
    (i / "truncated.jsonl").write_text('{"caption": "ok"}\n{"caption": "cut sho')
    (i / "not_object.jsonl").write_text('{"caption": "ok"}\n["a", "list"]\n')
    (i / "latin1.jsonl").write_bytes(b'{"caption": "ok"}\n{"caption": "ok"}\n{"caption": "caf\xe9"}\n')
    (i / "latin1.csv").write_bytes(b"id,caption\n1,fine\n2,na\xefve\n")
    (i / "latin1.txt").write_bytes(b"a fine caption\nna\xefve\n")
    (i / "ragged.csv").write_text("id,caption\n1,a dog\n2,a cat,extra\n")
    (i / "bad.json").write_text('{"a": "x",\n "b": }\n')
    (i / "caps.xyz").write_text("a caption\n")
    (i / "nokeys.jsonl").write_text(_jsonl([{"id": 100 + r["id"], "caption": r["caption"]} for r in CAPTIONS]))
    (i / "trunc.jsonl.gz").write_bytes(gzip.compress(_jsonl(CAPTIONS).encode())[:40])
    import pandas as pd

    pd.DataFrame(CAPTIONS).to_parquet(i / "caps.parquet")
    (i / "parquet_named.jsonl").write_bytes((i / "caps.parquet").read_bytes())
    (i / "pairs.jsonl").write_text(_jsonl([{"local_caption": r["caption"], "reference_caption": "a bus"}
                                           for r in CAPTIONS]))
    (i / "pairs_missing.jsonl").write_text(_jsonl([{"local_caption": "a", "reference_caption": "b"},
                                                   {"local_caption": "c"}]))
    (i / "pool.txt").write_text("a red bus on a street\na photo of a dog\nan old station at night\n")
    (i / "pool_empty.txt").write_text("\n\n")
    (i / "prompts.jsonl").write_text(_jsonl([{"prompt": "a red bus"}, {"prompt": "a cat on a mat"}]))
    (i / "params_bad_utf8.yaml").write_bytes(b"run: x\nnotebooks: []\n# caf\xe9\n")
    (i / "requests_bad.jsonl").write_text('{"request_id": "x"}\n')
    (i / "resp_bad.jsonl").write_text('{"request_id": "a", "ok": true}\nnot json\n{"request_id": "b", "ok": true}\n')
    o = root / "out"
    o.mkdir()
    (o / "existing.json").write_text('{"keep": true}\n')
    (o / "adir").mkdir()
    (o / "afile").write_text("x\n")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("battery") / "work"
    root.mkdir()
    make_inputs(root)
    return root


# ---------------------------------------------------------------------------------------------
# the battery: (id, argv, what the single error line must contain)

CASES = [
    # --- text-stats: silent zeros are errors that name the file and list the fields
    Case("text-top-k-list-with-zero", ["text-stats", "in/good.jsonl", "--top-k", "10,0,100"], ["--top-k", "0"]),
    Case("text-empty-file", ["text-stats", "in/empty.jsonl"], ["in/empty.jsonl", "empty"]),
    Case("text-blank-lines-only", ["text-stats", "in/blank.jsonl"], ["in/blank.jsonl", "empty"]),
    Case("text-autodetect-fails", ["text-stats", "in/iiw_like.jsonl"],
         ["in/iiw_like.jsonl", "no caption field", "IIW", "image/key", "--caption-field"]),
    Case("text-mistyped-field", ["text-stats", "in/good.jsonl", "--caption-field", "captoin"],
         ["in/good.jsonl", "captoin", "no row has this field", "caption, id", "--caption-field"]),
    Case("text-field-on-some-rows", ["text-stats", "in/some_missing.jsonl", "--caption-field", "caption"],
         ["in/some_missing.jsonl", "line 2", "'caption'", "--on-missing skip"]),
    Case("text-all-captions-empty", ["text-stats", "in/all_empty.jsonl", "--caption-field", "caption"],
         ["in/all_empty.jsonl", "'caption'", "empty or null"]),
    Case("text-malformed-json", ["text-stats", "in/malformed.jsonl", "--caption-field", "caption"],
         ["in/malformed.jsonl", "line 2", "not valid JSON"]),
    Case("text-truncated-json", ["text-stats", "in/truncated.jsonl"], ["in/truncated.jsonl", "line 2"]),
    Case("text-not-an-object", ["text-stats", "in/not_object.jsonl"], ["in/not_object.jsonl", "line 2"]),
    Case("text-latin1-jsonl", ["text-stats", "in/latin1.jsonl"], ["in/latin1.jsonl:3", "UTF-8", "0xe9"]),
    Case("text-latin1-csv", ["text-stats", "in/latin1.csv", "--caption-field", "caption"],
         ["in/latin1.csv:3", "UTF-8", "0xef"]),
    Case("text-latin1-txt", ["text-stats", "in/latin1.txt"], ["in/latin1.txt:2", "UTF-8"]),
    Case("text-ragged-csv", ["text-stats", "in/ragged.csv", "--caption-field", "caption"],
         ["in/ragged.csv", "line 3", "fields"]),
    Case("text-bad-json", ["text-stats", "in/bad.json"], ["in/bad.json", "line 2"]),
    Case("text-unknown-suffix", ["text-stats", "in/caps.xyz"], ["in/caps.xyz", "format"]),
    Case("text-parquet-named-jsonl", ["text-stats", "in/parquet_named.jsonl"], ["in/parquet_named.jsonl", "Parquet"]),
    Case("text-truncated-gzip", ["text-stats", "in/trunc.jsonl.gz"], ["in/trunc.jsonl.gz", "gzip"]),
    Case("text-missing-input", ["text-stats", "in/nope.jsonl"], ["in/nope.jsonl", "not found"]),
    Case("text-top-k-zero", ["text-stats", "in/good.jsonl", "--top-k", "0"], ["--top-k", "positive"]),
    Case("text-negative-budget", ["text-stats", "in/good.jsonl", "--budgets", "16,-4"], ["--budgets", "positive"]),
    Case("text-max-records-zero", ["text-stats", "in/good.jsonl", "--max-records", "0"], ["--max-records"]),
    Case("text-out-is-directory", ["text-stats", "in/good.jsonl", "--out", "out/adir"], ["out/adir", "directory"]),
    Case("text-out-under-a-file", ["text-stats", "in/good.jsonl", "--out", "out/afile/x.json"],
         ["out/afile", "is a file"]),
    Case("text-hf-offline", ["surfaces", "show", "in/hf.yaml"], ["hf:someone/some-dataset", "offline",
                                                                "HF_HUB_OFFLINE", "hf_disk"],
         env={"HF_HUB_OFFLINE": "1"}),
    # --- slice
    Case("slice-empty-surface", ["slice", "--surface", "a=in/good.jsonl:caption:id", "--surface",
                                 "b=in/empty.jsonl:caption:id", "--out", "out/slices"], ["in/empty.jsonl", "empty"]),
    Case("slice-no-shared-key", ["slice", "--surface", "a=in/good.jsonl:caption:id", "--surface",
                                 "b=in/nokeys.jsonl:caption:id", "--out", "out/slices"],
         ["share no key", "key_field"]),
    Case("slice-mistyped-key", ["slice", "--surface", "a=in/good.jsonl:caption:idd", "--surface",
                                "b=in/other.jsonl:caption:id", "--out", "out/slices"], ["in/good.jsonl", "line 1", "idd"]),
    Case("slice-out-is-file", ["slice", "--surface", "a=in/good.jsonl:caption:id", "--surface",
                               "b=in/other.jsonl:caption:id", "--out", "out/afile"], ["out/afile", "file"]),
    Case("slice-n-zero", ["slice", "--surface", "a=in/good.jsonl:caption:id", "--surface",
                          "b=in/other.jsonl:caption:id", "--out", "out/slices", "--n", "0"], ["--n", "positive"]),
    # --- prompt pools and prompt support
    Case("pools-missing-source", ["prompt-pools", "prepare", "--source", "p=in/nope.txt", "--out", "out/pools"],
         ["in/nope.txt", "not found"]),
    Case("pools-latin1-source", ["prompt-pools", "prepare", "--source", "p=in/latin1.txt", "--out", "out/pools"],
         ["in/latin1.txt:2", "UTF-8"]),
    Case("pools-mistyped-field", ["prompt-pools", "prepare", "--source", "p=in/prompts.jsonl:promt", "--out",
                                  "out/pools"], ["in/prompts.jsonl", "row 1", "promt"]),
    Case("pools-out-is-file", ["prompt-pools", "prepare", "--source", "p=in/pool.txt", "--out", "out/afile"],
         ["out/afile", "file"]),
    Case("support-pairs-missing-field", ["prompt-support", "--pairs", "in/pairs_missing.jsonl", "--pool",
                                         "p=in/pool.txt", "--out", "out/s.tsv"],
         ["in/pairs_missing.jsonl", "row 2", "reference_caption"]),
    Case("support-empty-pool", ["prompt-support", "--pairs", "in/pairs.jsonl", "--pool", "p=in/pool_empty.txt",
                                "--out", "out/s.tsv"], ["in/pool_empty.txt", "no non-empty prompts"]),
    Case("support-block-size-zero", ["prompt-support", "--pairs", "in/pairs.jsonl", "--pool", "p=in/pool.txt",
                                     "--block-size", "0", "--out", "out/s.tsv"], ["--block-size", "positive"]),
    Case("support-out-is-directory", ["prompt-support", "--pairs", "in/pairs.jsonl", "--pool", "p=in/pool.txt",
                                      "--out", "out/adir"], ["out/adir", "directory"]),
    Case("support-pairs-wrong-format", ["prompt-support", "--pairs", "in/pool.txt", "--pool", "p=in/pool.txt",
                                        "--out", "out/s.tsv"], ["in/pool.txt", ".jsonl", ".parquet"]),
    Case("support-latin1-pool", ["prompt-support", "--pairs", "in/pairs.jsonl", "--pool", "p=in/latin1.txt",
                                 "--out", "out/s.tsv"], ["in/latin1.txt:2", "UTF-8"]),
    # --- claims (slower start: the model-call layer imports jsonschema)
    Case("claims-parquet-input", ["claims", "build", "--input", "in/caps.parquet", "--surface", "s",
                                  "--out", "out/req.jsonl"], ["in/caps.parquet", "JSON-lines", ".jsonl", "Parquet"]),
    Case("claims-mistyped-field", ["claims", "build", "--input", "in/good.jsonl", "--caption-field", "captoin",
                                   "--surface", "s", "--out", "out/req.jsonl"],
         ["in/good.jsonl", "captoin", "caption, id"]),
    Case("claims-unknown-prompt-set", ["claims", "build", "--input", "in/good.jsonl", "--surface", "s",
                                       "--prompts", "mine", "--out", "out/req.jsonl"], ["--prompts", "invalid choice"]),
    Case("claims-reference-folder-without-prompts", ["claims", "build", "--input", "in/good.jsonl", "--surface", "s",
                                                     "--out", "out/req.jsonl"],
         ["in/noref/prompts/claimed_cbu_v2.json", "missing"], env={"CAPAUDIT_REFERENCE_DIR": "in/noref"}),
    Case("claims-summarize-malformed", ["claims", "summarize", "--responses", "in/resp_bad.jsonl",
                                        "--out", "out/sum.json"], ["in/resp_bad.jsonl:2", "unreadable"]),
    # --- llm
    Case("llm-run-bad-requests", ["llm", "run", "--requests", "in/requests_bad.jsonl", "--out", "out/resp.jsonl",
                                  "--url", "http://127.0.0.1:9", "--model", "m", "--no-progress"],
         ["in/requests_bad.jsonl:1", "missing field"]),
    # --- data, notebooks, params
    Case("data-list-unknown-dataset", ["data", "list", "--dataset", "nope"], ["nope", "not in the data registry"]),
    Case("data-path-unknown-file", ["data", "path", "imageinwords", "nope.jsonl"], ["imageinwords/nope.jsonl"]),
    Case("notebook-unknown-name", ["notebook", "run", "no_such_notebook", "--params", "params/demo.yaml"],
         ["no_such_notebook", "01_surfaces"]),
    Case("params-missing", ["surfaces", "show", "in/nope.yaml"], ["in/nope.yaml", "not found"]),
    Case("params-not-utf8", ["surfaces", "show", "in/params_bad_utf8.yaml"], ["in/params_bad_utf8.yaml:3", "UTF-8"]),
]


def _prepare(case: Case, work: Path) -> Path:
    if case.id == "text-hf-offline":
        (work / "in" / "hf.yaml").write_text(
            "run: hf\nsurfaces:\n  - {name: x, format: hf, hf_path: someone/some-dataset, caption_field: caption}\n")
    if case.id == "notebook-unknown-name":  # against the repository's params and notebooks
        return REPO
    return work


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    """All cases at once, in parallel (each in its own folder, so snapshots stay exact)."""
    return run_cases(CASES, tmp_path_factory.mktemp("battery_cases"), make_inputs, _prepare)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fails_loudly_and_cleanly(case: Case, battery):
    assert_fails_cleanly(case, battery[case.id])


def test_debug_flag_shows_the_traceback(scratch: Path):
    p = run_cli(["text-stats", "in/empty.jsonl", "--debug"], scratch)
    assert p.returncode == 1 and "Traceback" in p.stderr and p.stderr.strip().splitlines()[-1].startswith(
        "capaudit text-stats: error:")
    p = run_cli(["--debug", "text-stats", "in/empty.jsonl"], scratch)
    assert "Traceback" in p.stderr


def test_closed_stdout_pipe_is_quiet(scratch: Path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    p = subprocess.run(f"{' '.join(EXE)} data list | head -n 1", shell=True, cwd=scratch, env=env,
                       capture_output=True, text=True, executable="/bin/bash")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1
    assert p.stderr == "", p.stderr


# ---------------------------------------------------------------------------------------------
# valid but unusual inputs work

def test_unusual_but_valid_inputs_work(tmp_path: Path):
    long_caption = "a red bus " * 20000  # a 200,000-character line
    rows = [{"caption": "The image shows a bus.\u0000 With a NUL inside."}, {"caption": long_caption},
            {"caption": "caf\u00e9 \u2014 na\u00efve"}]
    crlf_bom = ("\ufeff" + _jsonl(rows).replace("\n", "\r\n")).encode("utf-8")
    (tmp_path / "u.jsonl").write_bytes(crlf_bom)
    (tmp_path / "u.csv").write_bytes(("\ufeffid,caption\r\n" + "".join(
        f'{i},"{r["caption"]}"\r\n' for i, r in enumerate(rows))).encode("utf-8"))
    (tmp_path / "u.txt").write_bytes(("\ufeff" + "".join(r["caption"].replace("\u0000", " ") + "\r\n"
                                                        for r in rows)).encode("utf-8"))
    results = {}
    for name, extra in (("u.jsonl", ["--caption-field", "caption"]), ("u.csv", ["--caption-field", "caption"]),
                        ("u.txt", [])):
        out = tmp_path / f"{name}.json"
        p = run_cli(["text-stats", name, *extra, "--budgets", "16,64", "--out", str(out)], tmp_path)
        assert p.returncode == 0, p.stderr
        results[name] = json.loads(out.read_text())
    for r in results.values():
        assert r["records"] == 3
        assert r["budgets"]["64"]["opener_rate"] == pytest.approx(1 / 3)
    # BOM and CRLF change nothing: JSONL and CSV give identical numbers
    assert results["u.jsonl"]["budgets"] == results["u.csv"]["budgets"]
    assert results["u.jsonl"]["avg_lex"] == pytest.approx((9 + 60000 + 2) / 3)
