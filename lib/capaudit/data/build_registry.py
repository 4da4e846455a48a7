"""Generate ``registry.json`` from a local data folder and its ``PROVENANCE.md`` files.

Run as ``python -m capaudit.data.build_registry ../shared/data [--out lib/capaudit/data/registry.json]``.

Every file under ``<root>/<dataset>/`` (except ``PROVENANCE.md``/``README.md``) becomes one
``kind: "file"`` entry with its public source URL pinned to the commit
(``https://raw.githubusercontent.com/<repository>/<commit>/<original path>``), sha256, size and
license.  PROVENANCE.md layouts handled:

* a "Files" table ``| file | bytes | sha256 | rows | original path |``; the original path may be
  prefixed with its repository (``owner/name: path``, or ``owner/...: path`` when abbreviated) when a
  folder has several sources (``class_lists``);
* a ``sha256sum`` block (``dpg_bench``, ``coco_mini``) with the rule for the original path stated
  in the sentence before it (``original path = `prefix/` + path`` or ``= same path``).

The sha256 of every local file is recomputed and must equal the PROVENANCE value (and the byte
count too, where given); any mismatch aborts with an error naming the file.  A local file that
PROVENANCE does not list gets its computed sha256 and ``"sha256_source": "computed"``.

A few Hugging Face datasets used by the reference study (reference-spec §3.1 prompt pools and
§11.3 surfaces) are added as ``kind: "hf"`` entries: repo id, no sha256, for online users only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from capaudit.io.text import read_text_checked

from .registry import sha256_file

SKIP_NAMES = {"PROVENANCE.md", "README.md"}
RAW_URL = "https://raw.githubusercontent.com/{repository}/{commit}/{path}"

# Short license labels per dataset (and per source repository where a folder mixes sources),
# condensed from each PROVENANCE.md "License (as stated by the source)" section; the full text is
# kept in the registry's ``datasets[<name>].license_text``.
LICENSE_SHORT: Dict[str, str] = {
    "cc3m_validation": "Conceptual Captions license: may be freely used for any purpose (Google)",
    "coco_karpathy_captions": "CC BY 4.0 (COCO annotations)",
    "coco_mini": "CC BY 4.0 (COCO annotations)",
    "diffusiondb_phrases": "CC0 1.0 (DiffusionDB dataset)",
    "dpg_bench": "Apache-2.0 (seed prompts keep their own terms)",
    "drawbench": "unclear (no license stated)",
    "dsg": "Apache-2.0 (WHOOPS!: no use as training set; PoseScript: CC BY-NC-SA 4.0)",
    "gecko_prompts": "CC BY 4.0 (individual prompts keep source terms)",
    "geneval": "MIT",
    "imageinwords": "CC BY 4.0",
    "imagereward_diffusiondb_prompts": "Apache-2.0 (repository); DiffusionDB prompts CC0 1.0",
    "img2dataset_alttext_sample": "MIT (repository; origin of the pairs not stated)",
    "krea_open_prompts": "unclear (no license stated)",
    "nocaps_val": "unclear (no license stated)",
    "partiprompts": "Apache-2.0",
    "sugarcrepe": "MIT (captions CC BY 4.0)",
    "t2i_compbench": "MIT",
    "tifa": "Apache-2.0 (texts keep source terms)",
}
LICENSE_BY_REPO: Dict[Tuple[str, str], str] = {
    ("class_lists", "RajGothi/Visual-Entities-Empowered-Zero-Shot-Image-to-Text-Generation-Transfer-Across-Domains"):
        "CC BY 4.0 (Open Images annotations)",
    ("class_lists", "openimages/dataset"): "CC BY 4.0 (Open Images annotations); Apache-2.0 repository",
    ("class_lists", "cocodataset/panopticapi"): "CC BY 4.0 (COCO annotations); BSD-style repository",
    ("class_lists", "facebookresearch/Detic"):
        "Apache-2.0 (Detic); LVIS annotations CC BY 4.0; Objects365 terms not stated",
}
LICENSE_BY_SUFFIX: Dict[Tuple[str, str], str] = {
    ("coco_mini", ".jpg"): "per-image Flickr CC license (images[].license in the COCO JSON)",
}

# Hugging Face datasets of the reference study: online users only, no sha256.  Repo ids marked
# ``repo_verified: false`` are inferred from the reference's local folder names (spec §3.1) and
# must be checked on the Hub before use.
HF_ENTRIES: List[Dict[str, object]] = [
    # reference-spec §3.1: the prompt pools (sd_prompts_dedup_xzuyn is sensitivity-only; its repo id is inferred).
    {"dataset": "hf_prompt_pools", "path": "sd_prompts_2m_andyyang", "repo": "andyyang/stable_diffusion_prompts_2m",
     "repo_verified": True, "files": "sd_promts_2m.txt", "format": "txt", "field": None, "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "sd_prompts_dedup_xzuyn", "repo": "xzuyn/Stable-Diffusion-Prompts-Deduped-2.008M",
     "repo_verified": False, "origin_folder": "hf-raw (file v3_no_bos.txt)", "files": "v3_no_bos.txt", "format": "txt",
     "field": None, "sensitivity_only": True, "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "pickapic_rankings", "repo": "yuvalkirstain/pickapic_v2",
     "repo_verified": False, "origin_folder": "Pick-a-Pic", "format": "parquet", "field": "prompt", "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "civitai_flux_prompts_aconexx", "repo": "Aconexx/CivitAI-Flux-Prompts",
     "repo_verified": False, "origin_folder": "Aconexx_CivitAI_Flux_Prompts", "format": "jsonl", "field": "output",
     "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "flux_prompts_chrisgoringe", "repo": "ChrisGoringe/flux_prompts",
     "repo_verified": False, "origin_folder": "ChrisGoringe_flux_prompts", "format": "parquet", "field": "prompt",
     "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "flux_prompts_regpeter", "repo": "regpeter/flux_prompts",
     "repo_verified": False, "origin_folder": "regpeter_flux_prompts", "format": "parquet", "field": "prompt",
     "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "flux_improved_k_mktr", "repo": "k-mktr/improved-flux-prompts",
     "repo_verified": False, "origin_folder": "k_mktr_improved_flux_prompts", "format": "parquet", "field": "prompt",
     "spec": "§3.1"},
    {"dataset": "hf_prompt_pools", "path": "sdxl_refiner_prompts_falah", "repo": "Falah/1M_SDXL_Refiner_Prompts",
     "repo_verified": False, "origin_folder": "Falah_1M_SDXL_Refiner_Prompts", "format": "parquet",
     "field": "prompts", "spec": "§3.1"},
    # reference-spec §11.3: the reference caption surfaces of the paired tables.
    {"dataset": "hf_surfaces", "path": "ref_cc12m_qwen3vl8b", "repo": "undefined443/cc12m-wds-recaption",
     "repo_verified": True, "field": None, "captioner": "Qwen3-VL-8B-Instruct", "spec": "§11.3"},
    {"dataset": "hf_surfaces", "path": "ref_cc12m_llavanext", "repo": "CaptionEmporium/conceptual-captions-cc12m-llavanext",
     "repo_verified": True, "field": "caption_llava", "captioner": "LLaVA-Next-8B", "spec": "§11.3"},
    {"dataset": "hf_surfaces", "path": "ref_pixelprose_cc12m", "repo": "lodestones/pixelprose", "split": "cc12m",
     "repo_verified": True, "field": "vlm_caption", "captioner": "Gemini 1.0 Pro Vision", "spec": "§11.3"},
    {"dataset": "hf_surfaces", "path": "ref_datacomp_recap_llava15_llama3_8b", "repo": "UCSC-VLAA/Recap-DataComp-1B",
     "repo_verified": True, "files": "data/train_data", "field": "re_caption", "captioner": "LLaVA-1.5-LLaMA3-8B",
     "spec": "§11.3"},
    {"dataset": "hf_surfaces", "path": "ref_laion_pop_llama32_11b", "repo": "CaptionEmporium/laion-pop-llama3.2-11b",
     "repo_verified": True, "field": "caption_long_llama32", "captioner": "Llama-3.2-11B-Vision", "spec": "§11.3"},
    {"dataset": "hf_surfaces", "path": "ref_pd12m_full", "repo": "Spawning/pd12m-full",
     "repo_verified": True, "field": "caption", "captioner": "Florence-2-large", "spec": "§11.3"},
    # the reference study's released recaptioned corpora ("Ours"), one per source family
    {"dataset": "hf_released", "path": "ours_datacomp", "repo": "BootsofLagrangian/datacomp-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "DataComp", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_cc12m", "repo": "BootsofLagrangian/cc12m-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "CC12M", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_laion_pop", "repo": "BootsofLagrangian/laion-pop-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "LAION-pop", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_pd12m", "repo": "BootsofLagrangian/pd12m-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "PD12M", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_commoncatalog_cc_by", "repo": "BootsofLagrangian/commoncatalog-cc-by-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "CommonCatalog CC-BY", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_laion_aesthetics", "repo": "BootsofLagrangian/laion-aesthetics-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "LAION-Aesthetics", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_laion_highres_aesthetic", "repo": "BootsofLagrangian/laion-highres-aesthetic-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "LAION-HighRes-Aesthetic", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_megalith_cc0", "repo": "BootsofLagrangian/megalith-cc0-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "Megalith-CC0", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_released", "path": "ours_danbooru", "repo": "BootsofLagrangian/danbooru-recap-qwen3p5-35b-a3b",
     "repo_verified": True, "field": "caption_text", "family": "Danbooru", "captioner": "Qwen3.5-35B-A3B", "license": "CC-BY-4.0",
     "spec": "§11.3 (reference README, Released captions)"},
    {"dataset": "hf_surfaces", "path": "ref_danbooru_florence2", "repo": "KBlueLeaf/danbooru2023-florence2-caption",
     "repo_verified": True, "field": "parsed", "captioner": "Florence-2-large", "spec": "§11.3"},
]


class ProvenanceError(ValueError):
    """A PROVENANCE.md that cannot be parsed or that disagrees with the local files."""


def _section(text: str, title: str) -> str:
    """Body of the ``## <title>...`` section (up to the next ``## ``)."""
    m = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    return m.group(1).strip() if m else ""


def parse_sources(text: str, where: Path) -> List[Dict[str, str]]:
    """The ``- Repository:`` / ``- Commit:`` / ``- Original path(s):`` blocks of the Source section."""
    body = _section(text, "Source")
    sources: List[Dict[str, str]] = []
    for line in body.splitlines():
        m = re.match(r"- Repository: `([^`]+)`", line)
        if m:
            sources.append({"repository": m.group(1)})
            continue
        m = re.match(r"- Commit: `([0-9a-f]{40})`", line)
        if m:
            if not sources or "commit" in sources[-1]:
                raise ProvenanceError(f"{where}: 'Commit' line without a preceding 'Repository' line")
            sources[-1]["commit"] = m.group(1)
    if not sources or any("commit" not in s for s in sources):
        raise ProvenanceError(f"{where}: Source section needs '- Repository:' and '- Commit:' lines")
    return sources


def _strip_ticks(cell: str) -> str:
    cell = cell.strip()
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


def _resolve_repo(label: str, sources: Sequence[Dict[str, str]], where: Path) -> Dict[str, str]:
    hits = [s for s in sources if s["repository"] == label]
    if not hits and label.endswith("/..."):
        hits = [s for s in sources if s["repository"].startswith(label[:-3])]
    if len(hits) != 1:
        raise ProvenanceError(f"{where}: original-path prefix '{label}' matches {len(hits)} source repositories")
    return hits[0]


def parse_files(text: str, where: Path) -> List[Dict[str, object]]:
    """Per-file rows of the Files section: path, sha256, bytes (or None), rows, repository, commit, original path."""
    sources = parse_sources(text, where)
    body = _section(text, "Files")
    if not body:
        raise ProvenanceError(f"{where}: no '## Files' section")
    rows: List[Dict[str, object]] = []
    table = [ln for ln in body.splitlines() if ln.startswith("|")]
    if table:
        header = [c.strip().lower() for c in table[0].strip("|").split("|")]
        expected = ["file", "bytes", "sha256", "rows", "original path"]
        if header != expected:
            raise ProvenanceError(f"{where}: Files table header {header} != {expected}")
        for n, line in enumerate(table[2:], start=3):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 5:
                raise ProvenanceError(f"{where}: Files table row {n} has {len(cells)} cells, expected 5")
            path, nbytes, sha, nrows, orig = cells
            orig = _strip_ticks(orig)
            src = sources[0]
            m = re.match(r"^([^:`]+/[^:`]+): (.+)$", orig)
            if m:
                src = _resolve_repo(m.group(1).strip(), sources, where)
                orig = _strip_ticks(m.group(2))
            elif len(sources) > 1:
                raise ProvenanceError(f"{where}: row {n}: several sources but no repository prefix in '{orig}'")
            sha = _strip_ticks(sha)
            if not re.fullmatch(r"[0-9a-f]{64}", sha):
                raise ProvenanceError(f"{where}: row {n}: '{sha}' is not a sha256")
            rows.append({"path": _strip_ticks(path), "bytes": int(nbytes.replace(",", "")), "sha256": sha,
                         "rows": nrows, "repository": src["repository"], "commit": src["commit"],
                         "original_path": orig})
        return rows
    # sha256sum block
    m = re.search(r"original path = (?:`([^`]*)` \+ path|same path)", body)
    if not m:
        raise ProvenanceError(f"{where}: sha256sum block without an 'original path = ...' rule")
    prefix = m.group(1) or ""
    if len(sources) != 1:
        raise ProvenanceError(f"{where}: sha256sum layout with {len(sources)} sources is ambiguous")
    for line in body.splitlines():
        mm = re.match(r"^([0-9a-f]{64})  (\S.*)$", line)
        if mm:
            rows.append({"path": mm.group(2), "bytes": None, "sha256": mm.group(1), "rows": None,
                         "repository": sources[0]["repository"], "commit": sources[0]["commit"],
                         "original_path": prefix + mm.group(2)})
    if not rows:
        raise ProvenanceError(f"{where}: Files section has neither a table nor sha256sum lines")
    mt = re.search(r"(\d+) files, (\d+) bytes in total", body)
    if mt and int(mt.group(1)) != len(rows):
        raise ProvenanceError(f"{where}: states {mt.group(1)} files but lists {len(rows)} sha256 lines")
    return rows


def _license(dataset: str, repository: str, path: str) -> str:
    for (ds, suffix), label in LICENSE_BY_SUFFIX.items():
        if ds == dataset and path.endswith(suffix):
            return label
    if (dataset, repository) in LICENSE_BY_REPO:
        return LICENSE_BY_REPO[(dataset, repository)]
    if dataset in LICENSE_SHORT:
        return LICENSE_SHORT[dataset]
    raise ProvenanceError(f"{dataset}: no short license label in build_registry.LICENSE_SHORT; add one")


def build(root: Path) -> Dict[str, object]:
    """Registry dict for the data folder ``root`` (raises ProvenanceError on any mismatch)."""
    root = Path(root)
    datasets: Dict[str, object] = {}
    entries: List[Dict[str, object]] = []
    problems: List[str] = []
    for ds_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        dataset = ds_dir.name
        prov = ds_dir / "PROVENANCE.md"
        if not prov.exists():
            raise ProvenanceError(f"{ds_dir}: no PROVENANCE.md")
        text = read_text_checked(prov)
        sources = parse_sources(text, prov)
        listed = {r["path"]: r for r in parse_files(text, prov)}
        title = text.splitlines()[0].lstrip("# ").strip()
        local = sorted(p.relative_to(ds_dir).as_posix() for p in ds_dir.rglob("*")
                       if p.is_file() and p.name not in SKIP_NAMES)
        for missing in sorted(set(listed) - set(local)):
            problems.append(f"{ds_dir / missing}: listed in PROVENANCE.md but absent")
        total = 0
        for rel in local:
            fpath = ds_dir / rel
            actual = sha256_file(fpath)
            size = fpath.stat().st_size
            total += size
            row = listed.get(rel)
            if row is None:
                if len(sources) != 1:
                    problems.append(f"{fpath}: not in PROVENANCE.md and the folder has several sources")
                    continue
                row = {"path": rel, "bytes": None, "sha256": actual, "rows": None,
                       "repository": sources[0]["repository"], "commit": sources[0]["commit"],
                       "original_path": rel}
                source = "computed"
            else:
                source = "provenance"
                if row["sha256"] != actual:
                    problems.append(f"{fpath}: sha256 {actual} != PROVENANCE.md {row['sha256']}")
                if row["bytes"] is not None and row["bytes"] != size:
                    problems.append(f"{fpath}: {size} bytes != PROVENANCE.md {row['bytes']}")
            entry = {
                "dataset": dataset, "path": rel, "kind": "file",
                "url": RAW_URL.format(repository=row["repository"], commit=row["commit"], path=row["original_path"]),
                "sha256": actual, "sha256_source": source, "bytes": size,
                "license": _license(dataset, str(row["repository"]), rel),
                "repository": row["repository"], "commit": row["commit"], "original_path": row["original_path"],
            }
            if row.get("rows"):
                entry["rows"] = row["rows"]
            entries.append(entry)
        datasets[dataset] = {
            "title": title, "sources": sources, "files": len(local), "bytes": total,
            "license": LICENSE_SHORT.get(dataset, "see license_text"),
            "license_text": re.sub(r"\s+", " ", _section(text, "License")).strip(),
        }
    if problems:
        raise ProvenanceError("registry build failed:\n  " + "\n  ".join(problems))
    hf = []
    for e in HF_ENTRIES:
        hf.append({"kind": "hf", "sha256": None, "url": f"https://huggingface.co/datasets/{e['repo']}", **e})
    return {
        "version": 1,
        "generated_by": "python -m capaudit.data.build_registry",
        "url_template": RAW_URL,
        "datasets": datasets,
        "entries": entries,
        "hf_entries": hf,
    }


def dumps(reg: Dict[str, object]) -> str:
    """Registry JSON text: header fields indented, one compact line per entry (diff-friendly)."""
    parts = []
    for key, value in reg.items():
        if key in ("entries", "hf_entries"):
            lines = ",\n".join("  " + json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in value)
            parts.append(f"{json.dumps(key)}: [\n{lines}\n ]")
        else:
            parts.append(f"{json.dumps(key)}: " + json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n "))
    return "{\n " + ",\n ".join(parts) + "\n}\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m capaudit.data.build_registry", description=__doc__.splitlines()[0])
    parser.add_argument("root", help="data folder holding <dataset>/PROVENANCE.md (e.g. ../shared/data)")
    parser.add_argument("--out", default=str(Path(__file__).with_name("registry.json")))
    args = parser.parse_args(argv)
    from capaudit.errors import one_line
    from capaudit.io.atomic import check_output_path, write_text_atomic

    try:
        check_output_path(args.out)
        if not Path(args.root).is_dir():
            raise ProvenanceError(f"{args.root}: data folder not found")
        reg = build(Path(args.root))
        write_text_atomic(args.out, dumps(reg))
    except (ProvenanceError, ValueError, OSError) as exc:  # one line, no traceback; registry untouched
        print(f"python -m capaudit.data.build_registry: error: {one_line(exc)}", file=sys.stderr)
        return 1
    print(f"{args.out}: {len(reg['entries'])} files in {len(reg['datasets'])} datasets, "
          f"{len(reg['hf_entries'])} hf entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
