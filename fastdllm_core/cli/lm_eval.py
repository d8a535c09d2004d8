"""``fastdllm lm-eval ...``: lm-eval's own command line with the ``fast_dllm_v2`` model registered.

Everything after ``lm-eval`` goes to lm-eval unchanged, e.g.::

    fastdllm lm-eval --model fast_dllm_v2 --model_args pretrained=DIR,threshold=0.9,max_new_tokens=256 \\
        --tasks gsm8k --num_fewshot 0 --apply_chat_template --fewshot_as_multiturn --output_path out/

Option of this wrapper (removed before lm-eval sees the arguments): ``--fastdllm-synth-arith PATH`` writes a
task YAML ``synth_arith`` over that GSM8K-form JSONL (and ``--fastdllm-gsm8k PATH`` a ``gsm8k_local`` task over a
local GSM8K file) into a temporary directory and adds it as ``--include_path``.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def _write_task_yaml(directory: Path, task: str, name: str, data_path: str) -> None:
    import yaml

    from ..evaluation.tasks import _gsm8k_form, _task_manager

    cfg = _gsm8k_form(_task_manager("gsm8k"), task, Path(data_path).resolve(), "paper")
    cfg["task"] = name
    # filters/metrics are plain data in gsm8k's YAML, so the config serialises as-is
    (directory / f"{name}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ..evaluation import lm_model  # noqa: F401 - registers fast_dllm_v2

    extra: list[tuple[str, str, str]] = []
    rest = []
    it = iter(argv)
    for a in it:
        if a in ("--fastdllm-synth-arith", "--fastdllm-gsm8k"):
            path = next(it, None)
            if path is None or not Path(path).is_file():
                print(f"fastdllm lm-eval: {a} needs an existing JSONL file, got {path!r}", file=sys.stderr)
                return 2
            extra.append(("synth_arith", "synth_arith", path) if a.endswith("arith")
                         else ("gsm8k", "gsm8k_local", path))
        else:
            rest.append(a)
    tmp = None
    if extra:
        tmp = tempfile.TemporaryDirectory(prefix="fastdllm-tasks-")
        for task, name, path in extra:
            _write_task_yaml(Path(tmp.name), task, name, path)
        rest += ["--include_path", tmp.name]
    from lm_eval.__main__ import cli_evaluate

    old = sys.argv
    sys.argv = ["lm-eval", *rest]
    try:
        cli_evaluate()
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    finally:
        sys.argv = old
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
