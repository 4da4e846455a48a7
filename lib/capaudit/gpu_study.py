"""The real study on GPUs, one command per model: serve it, wait, run its stages, stop it.

    capaudit study run-model extractor|judge-qwen|judge-gemma|captioner --params params/paper.yaml [--dry-run]
    capaudit study run-stage recap --params PLAN      # the recap stage of a plan (notebook 06_recap's call)
    capaudit study models                             # the four models, their configs and GPU counts

``run-model NAME`` reads the model's serving config (``serving/<config>.yaml``), the reference's
own vLLM config for that model (``configs/recap/vllm_serve*.yaml`` of the reference folder, through
the checksummed registry of :mod:`capaudit.data.reference`) and the plan, and checks, before
anything runs:

* the served model name (``vllm.served-model-name``, else ``model``) equals the model each plan
  key this server answers requests (``claims.model``; ``judges.judges[NAME].model``;
  ``judges.extractor`` where ``judges.extractor_url`` is the same server; ``recap.model``): a
  mismatch makes every request 404;
* the serving config's ``revision`` equals the plan's (``claims.revision``,
  ``judges.judges[NAME].revision``, ``judges.extractor_revision``, ``recap.revision``);
* the plan's URL for the model is ``http://127.0.0.1:PORT`` (or ``localhost``), and the serving
  config binds 127.0.0.1: the server is started on that PORT (``--port``, as the Makefile's serve
  targets do; the config's own port is only ``llm serve-cmd``'s default);
* the vLLM arguments (``model``, ``revision`` and every ``vllm:`` option) equal the reference's
  config for that model, except ``host``/``port`` and the differences listed in :data:`MODELS`
  (``deliberate``), which the command names on stderr.

Any mismatch is one line naming both files and the key, exit status 1, nothing started. Then, unless
``--dry-run`` (which prints the commands, shell-quoted, one per line, and runs nothing), before the
server starts (a model load costs minutes of GPU time): the stage's inputs must be there
(:func:`missing_inputs`), every endpoint the stage needs that this command does not serve must answer
(:func:`unanswered_endpoints`; ``--no-input-check`` skips both) and the port must be free. Then:

1. the server: the ``vllm serve`` line of ``capaudit llm serve-cmd CONFIG --host 127.0.0.1 --port PORT``,
   in its own process group;
2. ``capaudit llm wait --url URL --timeout S`` (and the same for every other endpoint the stage needs
   that this command does not serve: the judges stage asks its extractor and every judge in one run);
3. the plan's stage(s) for that model (:func:`steps_for`), each a ``capaudit`` command;
4. the server's process group is stopped (SIGTERM, then SIGKILL after ``--stop-timeout``) on every
   exit: success, a failed step (its exit status is returned), Ctrl-C (130) or SIGTERM (143).

Nothing here is a stage: the steps are the stages' own commands, so a GPU run and ``make paper``
write the same artifacts into the same resumable stores.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlparse

import yaml

from capaudit.errors import InputError

LOCAL_HOSTS = ("127.0.0.1", "localhost")
#: reference keys that are deployment, not the model's serving arguments
DEPLOYMENT_KEYS = ("host", "port")


@dataclass(frozen=True)
class ModelSpec:
    """One model of the study: its serving config, the reference's config, what the plan asks of it."""

    name: str
    serving: str  # a name in serving/
    reference: str  # a reference-folder path (registry)
    role: str  # extractor | judge | captioner
    stage: str  # claims | judges | recap: the plan section whose endpoint this server is
    judge: Optional[str] = None  # the judges.judges[] name this server answers (role judge)
    #: vLLM option -> why the serving config differs from the reference there (named on every run)
    deliberate: Mapping[str, str] = field(default_factory=dict)
    make_target: str = ""


MODELS: Dict[str, ModelSpec] = {
    "extractor": ModelSpec(
        "extractor", "extractor_qwen35_397b_a17b_fp8", "configs/recap/vllm_serve_397b_fp8.yaml", "extractor", "claims",
        deliberate={
            "max-num-seqs": "1024, the claims client's concurrency (the reference's 1536 was the judge's load)",
            "max-cudagraph-capture-size": "left at vLLM's default for the text-only extractor",
            "limit-mm-per-prompt": "text-only requests: the image options are left out",
            "mm-processor-kwargs": "text-only requests: the image options are left out",
            "allowed-local-media-path": "text-only requests: the image options are left out",
        }, make_target="study-extractor"),
    "judge-qwen": ModelSpec(
        "judge-qwen", "judge_qwen35_397b_a17b_fp8", "configs/recap/vllm_serve_397b_fp8.yaml", "judge", "judges",
        judge="Qwen3.5-397B-A17B-FP8", make_target="study-judge-qwen"),
    "judge-gemma": ModelSpec(
        "judge-gemma", "judge_gemma4_31b_it", "configs/recap/vllm_serve_gemma4_31b_it.yaml", "judge", "judges",
        judge="Gemma-4-31B-IT", make_target="study-judge-gemma"),
    "captioner": ModelSpec(
        "captioner", "captioner_qwen35_35b_a3b_fp8", "configs/recap/vllm_serve.yaml", "captioner", "recap",
        deliberate={"allowed-local-media-path": "/ so that --image-mode file (file:// URLs of the originals) works"},
        make_target="study-captioner"),
}


@dataclass
class Endpoint:
    """A URL the stage sends requests to, the model it names there, and which plan keys say so."""

    url: str
    model: str
    revision: Optional[str]
    url_key: str
    model_key: str
    revision_key: str


@dataclass
class Plan:
    """What ``run-model`` would do (the dry run prints :meth:`lines`)."""

    model: ModelSpec
    serving_path: str
    serve_argv: List[str]
    serve_env: Dict[str, str]
    url: str
    wait_urls: List[str]
    steps: List[List[str]]
    wait_timeout: float
    notes: List[str]
    gpus: int
    external: List[Endpoint] = field(default_factory=list)

    def serve_line(self) -> str:
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.serve_env.items())]
        return " ".join(env + [shlex.quote(a) for a in self.serve_argv])

    def wait_argv(self) -> List[str]:
        argv = capaudit_argv() + ["llm", "wait"]
        for u in self.wait_urls:
            argv += ["--url", u]
        return argv + ["--timeout", f"{self.wait_timeout:g}"]

    def lines(self) -> List[str]:
        return [self.serve_line(), shlex.join(self.wait_argv())] + [shlex.join(s) for s in self.steps]


def capaudit_argv() -> List[str]:
    """How this process's ``capaudit`` is started: the script beside the interpreter, else ``python -m``."""
    script = Path(sys.executable).parent / "capaudit"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "capaudit.cli"]


# --- reading the plan --------------------------------------------------------------------------------

def _section(raw: Mapping[str, Any], name: str, plan: str) -> Mapping[str, Any]:
    sec = raw.get(name)
    if not isinstance(sec, Mapping):
        raise InputError(f"{plan}: no '{name}' section, so no stage of this plan uses this model" +
                         (" (the plan recaptions nothing: the published study audits the released corpora; add a "
                          "'recap:' section, as in params/demo.yaml, with model, url, revision, policies and inputs, "
                          "to re-caption)" if name == "recap" else ""))
    return sec


def _rev(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def stage_endpoints(raw: Mapping[str, Any], stage: str, plan: str) -> List[Endpoint]:
    """Every endpoint the plan's ``stage`` sends requests to (the keys preflight checks)."""
    sec = _section(raw, stage, plan)
    out: List[Endpoint] = []
    if stage == "claims":
        if sec.get("url"):
            out.append(Endpoint(str(sec["url"]), str(sec.get("model", "")), _rev(sec.get("revision")),
                                "claims.url", "claims.model", "claims.revision"))
    elif stage == "judges":
        if sec.get("extractor_url"):
            out.append(Endpoint(str(sec["extractor_url"]), str(sec.get("extractor", "")),
                                _rev(sec.get("extractor_revision")), "judges.extractor_url", "judges.extractor",
                                "judges.extractor_revision"))
        for j in sec.get("judges") or []:
            if isinstance(j, Mapping) and j.get("url"):
                k = f"judges.judges[{j.get('name')}]"
                out.append(Endpoint(str(j["url"]), str(j.get("model", j.get("name"))), _rev(j.get("revision")),
                                    f"{k}.url", f"{k}.model", f"{k}.revision"))
    elif stage == "recap":
        urls = sec.get("url")
        for u in (urls if isinstance(urls, list) else [urls] if urls else []):
            out.append(Endpoint(str(u), str(sec.get("model", "")), _rev(sec.get("revision")),
                                "recap.url", "recap.model", "recap.revision"))
    return out


def primary_endpoint(spec: ModelSpec, endpoints: Sequence[Endpoint], plan: str) -> Endpoint:
    """The endpoint of the plan that this model's server is."""
    if spec.stage == "judges":
        key = f"judges.judges[{spec.judge}].url"
        found = [e for e in endpoints if e.url_key == key]
        if not found:
            raise InputError(f"{plan}: no judge named {spec.judge!r} with a url under judges.judges "
                             f"(the judge {spec.name} serves; name it so, with model, revision and url)")
        return found[0]
    if not endpoints:
        raise InputError(f"{plan}: key '{spec.stage}.url' is not set: the {spec.stage} stage would run its offline "
                         f"stand-in in process, not this model; point it at http://127.0.0.1:PORT")
    return endpoints[0]


def steps_for(spec: ModelSpec, plan: str) -> List[List[str]]:
    """The stage commands of the plan that use the model (the same calls as their notebooks)."""
    cap = capaudit_argv()
    if spec.stage == "claims":  # notebook 04_claims
        return [cap + ["claims", "run", "--params", plan]]
    if spec.stage == "judges":  # notebook 05_judges, this judge only (the other's server need not be up)
        return [cap + ["judges", "run", "--params", plan, "--judge", str(spec.judge)]]
    return [cap + ["study", "run-stage", "recap", "--params", plan]]  # notebook 06_recap


# --- the reference's serving config -------------------------------------------------------------------

def _normal(value: Any) -> Any:
    """Compare values as vLLM parses them: JSON-looking strings ('{"image": 1}') as JSON."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def load_reference(ref: str) -> Tuple[str, Dict[str, Any]]:
    """(label, mapping) of a reference serving config: a reference-folder path (registry, sha256-checked)
    or, for tests and deliberate variants, a local YAML file."""
    if Path(ref).is_file():
        path, label = Path(ref), ref
    else:
        from capaudit.data.reference import fetch_reference

        path, label = fetch_reference(ref), f"reference {ref}"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise InputError(f"{label}: a vLLM serve config must be a mapping")
    return label, data


def reference_differences(cfg: Mapping[str, Any], where: str, ref_label: str, ref: Mapping[str, Any],
                          deliberate: Mapping[str, str]) -> Tuple[List[str], List[str]]:
    """(mismatches, notes): each vLLM argument where the serving config and the reference differ."""
    ours: Dict[str, Any] = {"model": cfg.get("model"), "revision": cfg.get("revision"), **(cfg.get("vllm") or {})}
    theirs = {k: _normal(v) for k, v in ref.items()}
    for side in (ours, theirs):
        side.setdefault("served-model-name", side.get("model"))
    bad, notes = [], []
    for key in sorted((set(ours) | set(theirs)) - set(DEPLOYMENT_KEYS)):
        a, b = ours.get(key), theirs.get(key)
        if _normal(a) == b:
            continue
        say = f"{where} {'vllm.' if key not in ('model', 'revision') else ''}{key} = {json.dumps(a)} but {ref_label} " \
              f"{key} = {json.dumps(b)}"
        if key in deliberate:
            notes.append(f"deliberately different from {ref_label}: {key} ({deliberate[key]}; ours {json.dumps(a)}, "
                         f"reference {json.dumps(b)})")
        else:
            bad.append(say)
    if theirs.get("host") not in (None, "127.0.0.1"):
        notes.append(f"host 127.0.0.1, not the reference's {theirs['host']} (served on loopback only)")
    return bad, notes


# --- the checks and the plan ------------------------------------------------------------------------

def gpu_count(cfg: Mapping[str, Any]) -> int:
    v = cfg.get("vllm") or {}
    n = 1
    for k in ("tensor-parallel-size", "data-parallel-size", "pipeline-parallel-size"):
        n *= int(v.get(k) or 1)
    return n


def build_plan(name: str, params: str, *, serving: Optional[str] = None, reference: Optional[str] = None,
               wait_timeout: float = 1800.0) -> Plan:
    """Check the model's serving config against the plan and the reference; the commands to run."""
    from capaudit.llm.serving import build_serve_command, load_serving_config

    if name not in MODELS:
        raise InputError(f"unknown model {name!r}; the study's models: {', '.join(MODELS)}")
    spec = MODELS[name]
    p = Path(params)
    if not p.is_file():
        raise InputError(f"{params}: no such params file")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{params}: not valid YAML: {exc}") from exc
    cfg = load_serving_config(serving or spec.serving)
    where = _display(cfg["_path"])
    vllm = cfg.get("vllm") or {}
    served = str(vllm.get("served-model-name") or cfg["model"])
    revision = _rev(cfg.get("revision"))

    endpoints = stage_endpoints(raw, spec.stage, params)
    primary = primary_endpoint(spec, endpoints, params)
    bad: List[str] = []
    notes: List[str] = []
    u = urlparse(primary.url)
    port = u.port
    if u.scheme != "http" or u.hostname not in LOCAL_HOSTS or port is None or u.path not in ("", "/", "/v1"):
        bad.append(f"{params} {primary.url_key} = {primary.url} but {where} is served here on http://127.0.0.1:PORT "
                   f"(host {cfg.get('host') or '127.0.0.1'}): point {primary.url_key} at http://127.0.0.1:PORT")
        port = port or 0
    if str(cfg.get("host") or "127.0.0.1") not in LOCAL_HOSTS:
        bad.append(f"{where} host = {cfg.get('host')} but {params} {primary.url_key} = {primary.url} (this command "
                   f"serves on 127.0.0.1 only)")
    if cfg.get("port") is not None and int(cfg["port"]) != port and port:
        notes.append(f"port {port} from {params} {primary.url_key}, not {where}'s default {cfg['port']}")
    mine = [e for e in endpoints if _same_server(e.url, primary.url)]
    for e in mine:
        if e.model != served:
            bad.append(f"{params} {e.model_key} = {e.model!r} but {where} vllm.served-model-name = {served!r} "
                       f"(the server at {e.url}; every request would 404)")
        if e.revision != revision:
            bad.append(f"{params} {e.revision_key} = {json.dumps(e.revision)} but {where} revision = "
                       f"{json.dumps(revision)} (the server at {e.url})")
    ref = reference or spec.reference
    if ref == "none":
        notes.append(f"{where} not compared with a reference config (--reference none)")
    else:
        ref_label, ref_cfg = load_reference(ref)
        rbad, rnotes = reference_differences(cfg, where, ref_label, ref_cfg, spec.deliberate)
        bad += rbad
        notes += rnotes
    if bad:
        raise InputError(f"run-model {name}: refused, nothing started: " + "; ".join(bad))
    cmd = build_serve_command(cfg, host="127.0.0.1", port=port)
    notes += cmd.warnings
    base = f"http://127.0.0.1:{port}"
    others: List[str] = []
    external: List[Endpoint] = []
    for e in endpoints:
        if _same_server(e.url, primary.url):
            continue
        if spec.stage == "judges" and e.url_key.startswith("judges.judges["):
            notes.append(f"{e.url_key} {e.url} ({e.model}) is another judge: not asked by this run (judges run "
                         f"--judge {spec.judge}); the cells and tables are written once every judge has answered")
            continue
        if e.url in others:
            continue
        if spec.stage == "judges" and extraction_stored(params, raw):
            notes.append(f"{e.url_key} {e.url} ({e.model}): the extraction is stored already; not asked")
            continue
        others.append(e.url)
        external.append(e)
        notes.append(f"{e.url_key} {e.url} ({e.model}) is not served by this command: it must answer while the "
                     f"stage runs (the {spec.stage} stage asks it in the same run)")
    gpus = gpu_count(cfg)
    notes.insert(0, f"{name}: {where} ({served}, {gpus} GPU{'s' if gpus != 1 else ''}) on {base} for "
                    + ", ".join(sorted({e.url_key for e in mine})) + f" of {params}")
    return Plan(spec, where, cmd.argv, cmd.env, base, [base] + others, steps_for(spec, params), wait_timeout, notes,
                gpus, external)


def extraction_stored(params: str, raw: Mapping[str, Any]) -> bool:
    """Whether the judges stage of ``params`` has asked its extractor every request of every slice
    already (then the extractor's server need not be up for a judge's run)."""
    from capaudit.config import load_config
    from capaudit.judges.stage import unasked
    from capaudit.judges.stage_params import slug

    art = load_config(params).out_dir / "artifacts" / "judges"
    slices = [s.get("name") for s in (raw.get("judges") or {}).get("slices") or [] if isinstance(s, Mapping)]
    for name in slices:
        d = art / slug(str(name)) / "claims"
        if not (d / "requests.jsonl").is_file() or unasked(d / "requests.jsonl", d / "responses.jsonl"):
            return False
    return bool(slices)


def _display(path: str) -> str:
    """A serving config as people name it: ``serving/<name>.yaml``, else relative to here, else as given."""
    from capaudit.llm.serving import SERVING_DIR

    p = Path(path).resolve()
    for base in (SERVING_DIR.parent, Path.cwd()):
        try:
            return str(p.relative_to(base.resolve()))
        except ValueError:
            continue
    return path


def _same_server(a: str, b: str) -> bool:
    ua, ub = urlparse(a), urlparse(b)
    host = lambda h: "127.0.0.1" if h == "localhost" else h  # noqa: E731
    return (ua.scheme, host(ua.hostname), ua.port) == (ub.scheme, host(ub.hostname), ub.port)


# --- before the server starts: the stage's inputs ------------------------------------------------------

def missing_inputs(spec: ModelSpec, params: str) -> List[str]:
    """What the model's stage will need and cannot have, found before minutes of GPU time go into
    loading the model: the judged slices' caption files (written by notebook 01b_cc12m_bridge), the
    claims surfaces' Hub datasets (asked once, as ``capaudit.preflight`` does), recap's input files."""
    from capaudit.config import load_config

    cfg = load_config(params)
    out: List[str] = []
    if spec.stage == "judges":
        holes = {"run_dir": str(cfg.out_dir), "artifacts": str(cfg.out_dir / "artifacts")}
        for sl in (cfg.raw.get("judges") or {}).get("slices") or []:
            for s in (sl.get("surfaces") or []) if isinstance(sl, Mapping) else []:
                if isinstance(s, Mapping) and s.get("source") == "jsonl" and s.get("path"):
                    path = str(s["path"])
                    for k, v in holes.items():
                        path = path.replace("{" + k + "}", v)
                    if not Path(path).is_file():
                        out.append(f"{params} judges.slices[{sl.get('name')}] surface {s.get('name')}: {path} does "
                                   f"not exist (run the stage that writes it first, e.g. `capaudit notebook run "
                                   f"01b_cc12m_bridge --params {params}`)")
    elif spec.stage == "claims":
        from capaudit.preflight import needs, unreachable

        names = {str(x["name"] if isinstance(x, Mapping) else x) for x in (cfg.raw["claims"].get("surfaces") or [])}
        hub = [n for n in needs(cfg) if n.kind == "hub" and n.where.startswith("surfaces[")
               and (not names or n.where[len("surfaces["):-1] in names)]
        out += [f"{params} {n.where} {n.target}: {why}" for n, why in unreachable(hub)]
    elif spec.stage == "recap":
        for i, item in enumerate((cfg.raw["recap"].get("inputs") or [])):
            f = item.get("file") if isinstance(item, Mapping) else item if isinstance(item, str) else None
            if f and not any(c in str(f) for c in "*?[") and not Path(str(f)).exists():
                out.append(f"{params} recap.inputs[{i}]: {f} does not exist")
    return out


def unanswered_endpoints(plan: Plan) -> List[str]:
    """The endpoints the stage needs that this command does not serve and that do not answer now (the
    judges stage asks its extractor and every judge in one run: the other server must be up first)."""
    from capaudit.preflight import Need, unreachable

    from capaudit.llm.serving import load_serving_config

    def serve_hint(e: Endpoint) -> str:
        for spec in sorted(MODELS.values(), key=lambda m: m.stage != plan.model.stage):
            cfg = load_serving_config(spec.serving)
            if str((cfg.get("vllm") or {}).get("served-model-name") or cfg["model"]) == e.model:
                return f"serving/serve.sh {spec.serving} --port {urlparse(e.url).port}"
        return "its server"

    bad = unreachable([Need("endpoint", e.url, e.url_key) for e in plan.external])
    by_url = {e.url: e for e in plan.external}
    return [f"{n.where} {n.target} ({by_url[n.target].model}) does not answer ({why[:100]}); this command does not "
            f"serve it and the {plan.model.stage} stage asks it in the same run: start it first "
            f"({serve_hint(by_url[n.target])})" for n, why in bad]


# --- running it -------------------------------------------------------------------------------------

class _Terminated(Exception):
    """SIGTERM reached this process."""


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after ``timeout`` seconds."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    try:  # stragglers of the group (vLLM workers) after the leader is gone
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _wait_ready(plan: Plan, server: subprocess.Popen) -> int:
    """``capaudit llm wait`` while watching the server: a server that exits while starting ends it."""
    _PARENT[0] = os.getpid()
    waiter = subprocess.Popen(plan.wait_argv(), preexec_fn=_die_with_parent)  # no orphan if this command is killed
    try:
        while True:
            rc = waiter.poll()
            if rc is not None:
                return rc
            if server.poll() is not None:
                waiter.terminate()
                waiter.wait()
                print(f"capaudit study run-model: error: the server exited with status {server.returncode} before "
                      f"it answered ({plan.serve_argv[0]} ...; its output is above)", file=sys.stderr)
                return 1
            time.sleep(0.2)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()


#: this command's pid, read by :func:`_die_with_parent` in a forked child (set before each spawn)
_PARENT = [0]


def _die_with_parent() -> None:
    """In the server's process: on Linux, SIGTERM when this command dies, even by SIGKILL (a killed job
    must not leave the GPUs held by an orphaned server)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != _PARENT[0]:  # the command died between fork and prctl: no signal will come
            os._exit(143)


def _port_in_use(url: str) -> Optional[str]:
    """Why ``url``'s port cannot be this command's (something accepts connections there), else ``None``."""
    import socket

    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 80), timeout=0.5):
            return "something accepts connections on that port"
    except OSError:
        return None


def _run_step(step: List[str], drain: float) -> int:
    """Run one stage command; on Ctrl-C or SIGTERM it gets SIGINT (its stores close cleanly) first."""
    proc = subprocess.Popen(step)
    try:
        return proc.wait()
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(drain)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise


def run_plan(plan: Plan, stop_timeout: float = 60.0) -> int:
    """Start the server, wait, run the steps, stop the server (always). Returns the exit status."""
    def on_term(signum: int, frame: Any) -> None:
        raise _Terminated()

    busy = _port_in_use(plan.url)
    if busy:
        print(f"capaudit study run-model: error: {plan.url} is already in use ({busy}): another server there would "
              f"answer this command's requests; stop it or point the plan elsewhere", file=sys.stderr)
        return 1
    old = signal.signal(signal.SIGTERM, on_term)
    server: Optional[subprocess.Popen] = None
    try:
        print(f"+ {plan.serve_line()}", file=sys.stderr, flush=True)
        _PARENT[0] = os.getpid()
        server = subprocess.Popen(plan.serve_argv, env={**os.environ, **plan.serve_env}, start_new_session=True,
                                  preexec_fn=_die_with_parent)
        print(f"capaudit study run-model: server pid {server.pid} on {plan.url}", file=sys.stderr, flush=True)
        print(f"+ {shlex.join(plan.wait_argv())}", file=sys.stderr, flush=True)
        rc = _wait_ready(plan, server)
        if rc:
            return rc
        for step in plan.steps:
            print(f"+ {shlex.join(step)}", file=sys.stderr, flush=True)
            rc = _run_step(step, stop_timeout)
            if rc:
                print(f"capaudit study run-model: error: step failed with status {rc}: {shlex.join(step)} "
                      f"(stores are resumable: rerun the same command to continue)", file=sys.stderr)
                return rc
            if server.poll() is not None:
                print(f"capaudit study run-model: error: the server exited with status {server.returncode} "
                      f"during {shlex.join(step)}", file=sys.stderr)
                return 1
        return 0
    except KeyboardInterrupt:
        print("capaudit study run-model: interrupted; stopping the server", file=sys.stderr)
        return 130
    except _Terminated:
        print("capaudit study run-model: terminated; stopping the server", file=sys.stderr)
        return 143
    finally:
        try:
            if server is not None:
                _stop(server, stop_timeout)
                print(f"capaudit study run-model: server pid {server.pid} stopped", file=sys.stderr, flush=True)
        finally:
            signal.signal(signal.SIGTERM, old)


# --- the command line ---------------------------------------------------------------------------------

def register(subparsers: Any) -> None:
    """Add ``study`` (run-model, run-stage, models) to the ``capaudit`` command."""
    st = subparsers.add_parser("study", help="the real study on GPUs: serve a model, run its stages, stop it")
    sub = st.add_subparsers(dest="study_command", metavar="STUDY_COMMAND")
    rm = sub.add_parser("run-model", help="serve one model of the study, run every stage of the plan that uses it")
    rm.add_argument("model", choices=sorted(MODELS), help="which model")
    rm.add_argument("--params", default="params/paper.yaml", help="the study plan (default params/paper.yaml)")
    rm.add_argument("--dry-run", action="store_true",
                    help="check, print the commands (shell-quoted, one per line) and run nothing")
    rm.add_argument("--serving", help="another serving config (path or serving/ name) for this model")
    rm.add_argument("--reference", help="another reference vLLM config (reference path or YAML file); "
                                        "'none' skips that comparison")
    rm.add_argument("--wait-timeout", type=float, default=1800.0,
                    help="seconds to wait for the server to answer (default 1800: large checkpoints load slowly)")
    rm.add_argument("--stop-timeout", type=float, default=60.0, help="seconds between SIGTERM and SIGKILL")
    rm.add_argument("--no-input-check", dest="input_check", action="store_false",
                    help="start the server even when the stage's inputs (judged caption files, the claims surfaces' "
                         "Hub datasets, recap input files) are missing or unreachable")
    rm.set_defaults(func=cmd_run_model)

    rs = sub.add_parser("run-stage", help="run one stage of a plan (recap: notebook 06_recap's call)")
    rs.add_argument("stage", choices=["recap"])
    rs.add_argument("--params", required=True)
    rs.set_defaults(func=cmd_run_stage)

    ls = sub.add_parser("models", help="the study's models: serving config, reference config, GPUs, make target")
    ls.set_defaults(func=cmd_models)
    st.set_defaults(func=lambda args: (st.print_help(), 2)[1])


def cmd_run_model(args: argparse.Namespace) -> int:
    plan = build_plan(args.model, args.params, serving=args.serving, reference=args.reference,
                      wait_timeout=args.wait_timeout)
    for note in plan.notes:
        print(f"capaudit study run-model: note: {note}", file=sys.stderr)
    if args.dry_run:
        print("\n".join(plan.lines()))
        return 0
    if args.input_check:
        missing = missing_inputs(plan.model, args.params) + unanswered_endpoints(plan)
        if missing:
            raise InputError(f"run-model {args.model}: refused before starting the server: " + "; ".join(missing)
                             + " (--no-input-check starts it anyway)")
    return run_plan(plan, args.stop_timeout)


def cmd_run_stage(args: argparse.Namespace) -> int:
    from capaudit.config import load_config
    from capaudit.recap import stage

    stage.run(load_config(args.params))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from capaudit.llm.serving import load_serving_config

    for spec in MODELS.values():
        cfg = load_serving_config(spec.serving)
        print(f"{spec.name}\tserving/{spec.serving}.yaml\t{spec.reference}\t{gpu_count(cfg)} GPUs\t"
              f"{spec.stage} stage\tmake {spec.make_target}")
    return 0


__all__ = ["MODELS", "ModelSpec", "Plan", "build_plan", "run_plan", "stage_endpoints", "reference_differences",
           "missing_inputs", "unanswered_endpoints", "steps_for", "gpu_count", "register"]
