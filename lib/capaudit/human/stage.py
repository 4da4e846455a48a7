"""The human-verification stage of a params file: where the study lives, and the simulated demo report.

``params`` section ``human`` = a :class:`~capaudit.human.protocol.StudyConfig` mapping plus the
stage keys ``db`` (study database; default ``<artifacts>/human/<study_id>.sqlite``),
``judged_claims`` (files or globs, relative to the run's artifacts folder; default
``judges/*/judged_claims.jsonl``) and ``simulate`` (``annotators``, ``accuracy``, ``seed``).

:func:`run_demo` builds a fresh *simulated* study from the judges stage's judged claims, lets
simulated annotators answer it through the annotator API, adjudicates disagreements with a simulated
adjudicator, exports it, and writes the rows of the judge–human agreement table (overall and by
surface group, per judge, with cluster-bootstrap intervals; ``artifacts/tables/human_judge_agreement.json``)
and of the human-corrected supported CBU per caption (per judge and surface,
:mod:`capaudit.human.corrected`; ``artifacts/tables/human_corrected_support.json``) for the paper to
render (:mod:`.demo_report`), the judge × human confusion counts
(``artifacts/human/confusion.json``, returned as ``confusion``: the notebook draws the figure with
:func:`capaudit.paper.human_figures.plot_confusion`; stages never import the renderer) and the
``human`` numbers fragment — every one marked simulated.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, Dict, List

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.summaries.agreement import read_agreement
from capaudit.summaries.numbers_fragments import write_numbers_fragment

from .corrected import CORRECTED_JSON, corrected_support
from .demo_report import agreement_rows, demo_numbers, write_report_rows
from .export import AGREEMENT_JSON, confusion_counts, export_study, status_report
from .params import HumanParams
from .protocol import StudyConfig
from .simulate import invite_simulated, simulate_adjudication, simulate_annotators
from .study import Study

SIM_LABEL = "simulated annotators"
#: judge × human consensus counts of the demo study (``artifacts/human/``), the confusion figure's data
CONFUSION_JSON = "confusion.json"


def study_config(cfg: RunConfig) -> StudyConfig:
    return HumanParams.from_config(cfg).study


def study_db_path(cfg: RunConfig) -> Path:
    """``human.db`` of the params file, else ``<artifacts>/human/<study_id>.sqlite``."""
    return HumanParams.from_config(cfg).db_path(cfg)


def judged_claims_paths(cfg: RunConfig) -> List[Path]:
    """The judged-claims files named by ``human.judged_claims`` (globs relative to the artifacts folder)."""
    patterns = HumanParams.from_config(cfg).judged_claims
    art = cfg.out_dir / "artifacts"
    found: List[Path] = []
    for pat in patterns:
        p = Path(pat)
        full = str(p if p.is_absolute() else art / p)
        hits = sorted(Path(h) for h in glob.glob(full))
        if not hits:
            raise InputError(f"no judged-claims file matches {full!r}; run the judges stage (05_judges) first",
                             path=cfg.path, field="human.judged_claims")
        found += [h for h in hits if h not in found]
    return found


def _remove_db(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def run_demo(cfg: RunConfig) -> Dict[str, Any]:
    """Build, simulate, export and report the demo study of ``cfg`` (module docstring)."""
    import pandas as pd

    params = HumanParams.from_config(cfg)
    conf = params.study
    if conf.mode != "simulated":
        raise InputError("the demo report builds a simulated study: set human.mode: simulated", path=cfg.path,
                         field="human.mode")
    n_ann, accuracy = params.simulate.annotators, params.simulate.accuracy
    seed = params.simulate.seed if params.simulate.seed is not None else conf.seed
    dirs = cfg.dirs()
    paths = judged_claims_paths(cfg)
    db = study_db_path(cfg)
    if db.exists():
        with Study.load(db) as old:
            if old.mode != "simulated":
                raise InputError("refusing to replace a real study with the simulated demo", path=db)
        _remove_db(db)
    study = Study.create(db, conf)
    try:
        report = study.sample(paths)
        study.seal()
        codes = invite_simulated(study, n_ann)
        assigned = study.assign()
        study.open()
        n_judgments = simulate_annotators(study, codes, seed=seed, accuracy=accuracy)
        n_adjudicated = simulate_adjudication(study, seed=seed)
        export_dir = dirs["artifacts"] / "human" / "export"
        exported = export_study(study, export_dir, judged_claims=paths)
        status = status_report(study)
        agreement = read_agreement(export_dir / AGREEMENT_JSON)
        rows = agreement_rows(agreement, SIM_LABEL)
        corrected = [r.flat() for r in corrected_support(study, paths, labels=SIM_LABEL)]
        tables = write_report_rows(rows, corrected, dirs["artifacts"], simulated=True,
                                   inputs=[str(export_dir / AGREEMENT_JSON), str(export_dir / CORRECTED_JSON)])
        confusion = confusion_counts(study)
        conf_path = write_json_atomic(dirs["artifacts"] / "human" / CONFUSION_JSON,
                                      {"simulated": True, "labels": SIM_LABEL, "confusion": confusion})
        numbers = demo_numbers(status["items"], n_judgments, agreement)
        frag = write_numbers_fragment(dirs["artifacts"], "human", numbers, backend=SIM_LABEL)
        manifest = {
            "stage": "human", "study_id": conf.study_id, "mode": "simulated", "backend": SIM_LABEL, "db": str(db),
            "judged_claims": report.sources, "sample": report.to_dict(), "assignment": assigned,
            "simulate": {"annotators": n_ann, "accuracy": accuracy, "seed": seed, "judgments": n_judgments,
                         "adjudications": n_adjudicated},
            "outputs": {k: str(v) for k, v in {**exported, "agreement_rows": tables["agreement"],
                                               "corrected_rows": tables["corrected"], "confusion": conf_path,
                                               "numbers": frag}.items()},
        }
        write_json_atomic(dirs["artifacts"] / "human" / "demo_manifest.json", manifest)
        return {"db": db, "table": pd.DataFrame(rows), "corrected": pd.DataFrame(corrected), "status": status,
                "confusion": confusion, "agreement": agreement, "manifest": manifest, "backend": SIM_LABEL}
    finally:
        study.close()


__all__ = ["CONFUSION_JSON", "judged_claims_paths", "run_demo", "study_config", "study_db_path"]
