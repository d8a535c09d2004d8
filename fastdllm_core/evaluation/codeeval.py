"""Code generation for HumanEval(+) / MBPP(+) / the synthetic code task, scored by EvalPlus out of process.

Datasets (EvalPlus form: ``task_id, prompt, canonical_solution, entry_point, base_input, plus_input, atol``):

* ``humaneval``: ``data_path`` or ``$HUMANEVAL_OVERRIDE_PATH`` (EvalPlus' own variable), else the original
  HumanEval file at ``../shared/data/humaneval/HumanEval.jsonl.gz`` (``$FASTDLLM_HUMANEVAL_PATH`` overrides it),
  else EvalPlus' download of HumanEval+ when online.  A file without ``plus_input`` (original HumanEval) is
  converted and scored **base-only**: the plus row is reported as ``n/a``, never as a plus score.
* ``mbpp``: ``data_path`` or ``$MBPP_OVERRIDE_PATH``, else EvalPlus' download when online.
* ``synth_code`` / ``synth_mbpp``: ``data_path`` (``code_test.jsonl.gz`` / ``mbpp_test.jsonl.gz`` from
  :func:`fastdllm_core.synthetic.write_suite`, or their directory) or ``$FASTDLLM_SYNTH_CODE_PATH`` /
  ``$FASTDLLM_SYNTH_MBPP_PATH``; scored as HumanEval / MBPP respectively.

Prompts (``prompt_style``): ``paper`` = EvalPlus' chat prompt for instruct models (its instruction prefix, the
problem in a fenced block, and the assistant turn opened with its response prefix and a ```python fence), via
``evalplus.provider.utility.make_raw_chat_prompt``; ``plain`` = the problem prompt as the user turn.  For
``synth_code`` and ``synth_mbpp`` ``paper`` means the suite's own convention, which is ``plain`` (see
:mod:`fastdllm_core.synthetic`);
``evalplus`` forces EvalPlus' prompt there.  Completions go through ``evalplus.sanitize(text, entry_point)``.

Scoring runs model-written code: each solution runs in a sandboxed child process (:mod:`.sandbox`;
docs/sandbox.md).
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..provenance import atomic_path
from .datacheck import check_file
from .task_common import TaskUnavailable, local_test_file, offline, shared_dir

log = logging.getLogger(__name__)

EVALPLUS_INSTRUCTION = ("Please provide a self-contained Python script that solves the following problem in a "
                        "markdown code block:")
EVALPLUS_RESPONSE = ("Below is a Python script with a self-contained function that solves the problem and passes "
                     "corresponding tests:")


SYNTH_FILES = {"synth_code": ("FASTDLLM_SYNTH_CODE_PATH", "code_test.jsonl.gz"),
               "synth_mbpp": ("FASTDLLM_SYNTH_MBPP_PATH", "mbpp_test.jsonl.gz")}
MBPP_FORM = ("mbpp", "synth_mbpp")  # scored by EvalPlus as MBPP (the others as HumanEval)


def read_jsonl(path) -> list[dict]:
    """The rows of a JSONL(.gz) file; a line that is not JSON is named (file and line)."""
    from .datacheck import iter_rows

    return [row for _, row in iter_rows(Path(path))]


def _worker(args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "fastdllm_core.evaluation.sandbox.worker", *args]
    full_env = {**os.environ, **env, "TOKENIZERS_PARALLELISM": "false"}
    try:
        proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"EvalPlus worker exceeded its {timeout:.0f} s limit: {' '.join(cmd)}") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"EvalPlus worker failed (rc={proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return proc


def resolve_dataset(task: str, data_path, work_dir: Path | None, check_only: bool = False) -> tuple[Path, bool, str]:
    """(EvalPlus-form file, plus inputs available, description of the source).  An original HumanEval file is
    converted into ``work_dir`` (a run's private scratch directory); ``check_only`` finds and checks the data
    without writing anything (the returned path is then the source file)."""
    if task in SYNTH_FILES:
        env_var, fname = SYNTH_FILES[task]
        p = local_test_file(data_path, env_var, fname,
                            f"{task} needs its test file: pass data_path=<suite dir>/{fname} (written by "
                            f"fastdllm_core.synthetic.write_suite) or set {env_var}",
                            f"{task} test file not found: {{p}} (write it with synthetic.write_suite; "
                            f"pass data_path= or set {env_var})")
        check_file(task, p)  # names file, line and field of a bad item; an empty file fails here too
        return p, True, f"synthetic suite {p}"
    env_var = "HUMANEVAL_OVERRIDE_PATH" if task == "humaneval" else "MBPP_OVERRIDE_PATH"
    p = data_path or os.environ.get(env_var)
    source = f"data_path {p}" if data_path else f"${env_var}={p}"
    if p:
        return _local_dataset(task, Path(p), source, env_var, work_dir, check_only)
    if task != "humaneval":
        return _evalplus_download(task, env_var)
    # HumanEval: HumanEval+ (EvalPlus' download) first; the original HumanEval (base tests only) when that fails
    original = os.environ.get("FASTDLLM_HUMANEVAL_PATH") or str(shared_dir() / "data/humaneval/HumanEval.jsonl.gz")
    try:
        return _evalplus_download(task, env_var)
    except TaskUnavailable as exc:
        if not Path(original).is_file():
            raise
        why = "offline" if offline() else f"HumanEval+ download failed: {exc.reason}"
        return _local_dataset(task, Path(original), f"original HumanEval {original} ({why})", env_var, work_dir,
                              check_only)


def _local_dataset(task: str, p: Path, source: str, env_var: str, work_dir, check_only: bool):
    """A local HumanEval(+) / MBPP+ file; the original HumanEval (no plus inputs) is rewritten base-only."""
    if not p.is_file():
        raise TaskUnavailable(f"{task} dataset not found at {p} ({source}); fix data_path= or ${env_var}")
    check_file(task, p)  # names file, line and field of a bad item; an empty file fails here too
    rows = read_jsonl(p)
    if "plus_input" in rows[0] and rows[0]["plus_input"]:
        return p, True, source
    if task == "mbpp":
        raise TaskUnavailable(f"{p} has no EvalPlus inputs (plus_input); MBPP needs the MbppPlus file "
                              "(set MBPP_OVERRIDE_PATH to MbppPlus-*.jsonl)")
    note = source + " (no plus inputs: base tests only)"
    if check_only:
        return p, False, note
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / "humaneval_base_only.jsonl"
    with atomic_path(out) as tmp:  # never a half-written file under the fixed name
        if "base_input" in rows[0]:
            tmp.write_text("".join(json.dumps({**r, "plus_input": []}) + "\n" for r in rows))
        else:
            _worker(["convert-humaneval", "--src", str(p), "--out", str(tmp)], {}, timeout=600)
    return out, False, note


def _evalplus_download(task: str, env_var: str):
    """EvalPlus' own download (HumanEval+ / MBPP+), only when online."""
    if offline():
        raise TaskUnavailable(f"{task}: offline and no local dataset; set {env_var} to the EvalPlus "
                              f"{'HumanEvalPlus' if task == 'humaneval' else 'MbppPlus'} jsonl (or pass data_path=)"
                              + (", or FASTDLLM_HUMANEVAL_PATH to the original HumanEval.jsonl.gz for base-only"
                                 if task == "humaneval" else ""))
    try:
        import socket

        old = socket.getdefaulttimeout()
        socket.setdefaulttimeout(30)
        try:
            from evalplus.data import get_human_eval_plus, get_mbpp_plus
            from evalplus.data.humaneval import _ready_human_eval_plus_path
            from evalplus.data.mbpp import _ready_mbpp_plus_path

            path = _ready_human_eval_plus_path() if task == "humaneval" else _ready_mbpp_plus_path()
            (get_human_eval_plus if task == "humaneval" else get_mbpp_plus)()
        finally:
            socket.setdefaulttimeout(old)
    except Exception as exc:  # noqa: BLE001 - turned into a clear reason
        raise TaskUnavailable(f"{task}: EvalPlus could not download its dataset ({type(exc).__name__}: {exc}); "
                              f"set {env_var} to a local copy") from exc
    return Path(path), True, f"EvalPlus download {path}"


def build_prompt(problem: dict, tokenizer, style: str, task: str) -> str:
    if style == "paper" and task in SYNTH_FILES:
        style = "plain"
    if style in ("paper", "evalplus"):
        from evalplus.provider.utility import make_raw_chat_prompt

        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"prompt_style={style!r} needs a tokenizer with a chat template")
        return make_raw_chat_prompt(problem["prompt"], EVALPLUS_INSTRUCTION, EVALPLUS_RESPONSE, tokenizer)
    if style == "plain":
        return tokenizer.apply_chat_template([{"role": "user", "content": problem["prompt"]}], tokenize=False,
                                             add_generation_prompt=True)
    raise ValueError(f"unknown prompt_style {style!r} for {task}; choose from paper, evalplus, plain")


def extract_code(text: str, entry_point: str) -> tuple[str, bool]:
    """(sanitized code, whether it defines ``entry_point``).  Text after a closing fence is dropped."""
    from evalplus.sanitize import sanitize

    if "```" in text and "```python" not in text and text.count("```") == 1:
        text = text.split("```")[0]  # the prompt opened the fence; the answer closes it
    code = sanitize(text, entry_point)
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code, False
    has = any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry_point for n in tree.body)
    return code, has


def generate_kept(lm, prompts: list[str], progress, **kw) -> list[str]:
    """``lm.generate_texts(prompts, **kw)`` with each answer appended to ``progress`` (a JSONL file; None: nothing
    kept) as soon as its batch is decoded; the answers already there (the same prompt and length) are read back,
    not decoded again, so a run killed part-way resumes with the items it had not answered."""
    if progress is None:
        return lm.generate_texts(prompts, **kw)
    import hashlib

    path = Path(progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = [hashlib.sha256(f"{kw.get('max_new_tokens')}\0{p}".encode()).hexdigest() for p in prompts]
    text = path.read_text() if path.exists() else ""
    done = {}
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            done[rec["key"]] = rec["text"]
        except (json.JSONDecodeError, KeyError, TypeError):  # a line cut by the kill: that item is decoded again
            continue
    todo = [i for i, k in enumerate(keys) if k not in done]
    if todo:
        names = kw.pop("names", None)
        with open(path, "a") as fh:
            fh.write("\n" if text and not text.endswith("\n") else "")  # end a line cut by the kill

            def keep(j: int, text: str) -> None:
                fh.write(json.dumps({"key": keys[todo[j]], "text": text}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                done[keys[todo[j]]] = text

            lm.generate_texts([prompts[i] for i in todo], names=[names[i] for i in todo] if names else None,
                              on_done=keep, **kw)
    return [done[k] for k in keys]


def pass_rows(samples: list[dict], has_plus: bool) -> list[dict]:
    """pass@1_base and pass@1_plus (percent, n) of scored items (``correct``, ``correct_plus``,
    ``has_entry_point``); without plus inputs the plus row is ``n/a``.  Notes count the answers with no function.
    The rows of a run, and of its shards merged (:func:`.shards.merge_shards`)."""
    n = len(samples)
    if not n:
        raise ValueError("pass_rows: no scored items")
    no_code = sum(1 for s in samples if not s["has_entry_point"])
    extra = f"{no_code} of {n} answers had no function (scored wrong)" if no_code else ""
    base = 100.0 * sum(bool(s["correct"]) for s in samples) / n
    rows = [{"metric": "pass@1_base", "value": base, "n": n, "filter": "evalplus.sanitize", "note": extra}]
    if has_plus:
        plus = 100.0 * sum(bool(s["correct_plus"]) for s in samples) / n
        rows.append({"metric": "pass@1_plus", "value": plus, "n": n, "filter": "evalplus.sanitize", "note": extra})
    else:
        note = "plus inputs not available in this dataset: base tests only"
        rows.append({"metric": "pass@1_plus", "value": "", "n": n, "filter": "evalplus.sanitize", "status": "n/a",
                     "note": f"{note}; {extra}" if extra else note})
    return rows


def score(dataset_file: Path, task: str, solutions: list[dict], work_dir: Path, base_only: bool,
          min_time_limit: float = 1.0, gt_time_limit_factor: float = 4.0, memory_limit_mb: int = 4096,
          parallel: int = 1, verdict_cache=None) -> list[dict]:
    """EvalPlus statuses for ``solutions`` (``task_id``, ``solution``), computed in a subprocess; every solution
    runs in the sandbox of :mod:`.sandbox` (each row's ``sandbox`` says which mechanisms were in force), or, with
    ``verdict_cache`` (a directory) and the full sandbox, reuses the verdict of an identical check made before
    (:class:`.sandbox.worker.VerdictCache`; each row's ``verdict_reused`` says which)."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    # a private scratch directory per call: two scorings sharing work_dir never touch each other's files
    with tempfile.TemporaryDirectory(prefix=".evalplus-score-", dir=work_dir) as scratch:
        return _score_in(Path(scratch), dataset_file, task, solutions, base_only, min_time_limit,
                         gt_time_limit_factor, memory_limit_mb, parallel, verdict_cache)


def _score_in(scratch: Path, dataset_file, task, solutions, base_only, min_time_limit, gt_time_limit_factor,
              memory_limit_mb, parallel, verdict_cache=None) -> list[dict]:
    samples = scratch / "evalplus_samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": s["task_id"], "solution": s["solution"]}) + "\n"
                               for s in solutions))
    out = scratch / "evalplus_results.json"
    dataset = "mbpp" if task in MBPP_FORM else "humaneval"
    sandbox_dir = os.environ.get("FASTDLLM_SANDBOX_DIR") or str(scratch / "sandbox")  # removed with scratch
    os.makedirs(sandbox_dir, exist_ok=True)
    env = {"HUMANEVAL_OVERRIDE_PATH" if dataset == "humaneval" else "MBPP_OVERRIDE_PATH": str(dataset_file),
           "EVALPLUS_MAX_MEMORY_BYTES": str(int(memory_limit_mb) * 1024 * 1024), "FASTDLLM_SANDBOX_DIR": sandbox_dir}
    args = ["score", "--dataset", dataset, "--samples", str(samples), "--out", str(out),
            "--min-time-limit", str(min_time_limit), "--gt-time-limit-factor", str(gt_time_limit_factor),
            "--parallel", str(parallel)]
    if base_only:
        args.append("--base-only")
    if verdict_cache:
        args += ["--verdict-cache", str(Path(verdict_cache).resolve())]
    _worker(args, env, timeout=120 + 2 * 65 * len(solutions) / max(parallel, 1))
    doc = json.loads(out.read_text())
    box = doc.get("sandbox", {})
    if not box.get("full") or box.get("fallback_from"):
        log.warning("model-written code ran in a weaker sandbox than the full set: %s (missing: %s)%s (see "
                    "docs/sandbox.md)", box.get("description"),
                    ", ".join(box.get("missing") or ["?"]),
                    f", mode {box.get('mode')} after {box['fallback_from']} failed" if box.get("fallback_from") else "")
    if box.get("setup_failures"):
        log.warning("%d check(s) could not set up their sandbox and were scored as not passing",
                    box["setup_failures"])
    log.info("code checks: %s run, %s verdicts reused", box.get("checks_run"), box.get("verdicts_reused"))
    return [{**r, "sandbox": box.get("description", "")} for r in doc["results"]]
