"""An EvalPlus check in the sandbox (see :mod:`fastdllm_core.evaluation.sandbox`): :func:`untrusted_check`, a
drop-in for ``evalplus.eval.untrusted_check``; the solution's process sends back its outputs and the scorer
judges them (:mod:`.verdict`)."""
from __future__ import annotations

import os
import signal
import struct

from . import verdict
from .kernel import _FAILED, _HDR, _SUCCESS, FAIL, PASS, TIMEOUT
from .process import run

OUTPUT_BYTES = 32 << 20  # room for a check's encoded outputs; an output that does not fit is a failed input


def _execute(entry_point, code, inputs, time_limits, fast_check, memory_bytes, shm):
    """EvalPlus 0.3.1's ``unsafe_execute`` (same guard and time limits) without its comparison: each output is
    sent back to the scorer as a record (:mod:`.verdict`: exact built-in types only) and judged there, so that
    neither the expected outputs nor the verdict are ever in the solution's process.

    Header: ``progress`` (offset 4) counts the records written, ``used`` (offset 28) their bytes.  An exception
    (or a per-input time limit) is an error record; with ``fast_check`` it ends the run (``_FAILED``), as in
    EvalPlus.  The scorer stops the child at the first output that fails under ``fast_check``
    (:func:`untrusted_check`).
    """
    from evalplus.eval.utils import reliability_guard, swallow_io, time_limit

    pos = _HDR

    def record(i, kind, payload=b""):
        nonlocal pos
        try:
            pos = verdict.write_record(shm, pos, kind, payload)
        except OverflowError:
            pos = verdict.write_record(shm, pos, verdict.REC_ERROR, b"")
        struct.pack_into("i", shm, 28, pos - _HDR)
        struct.pack_into("i", shm, 4, i + 1)

    reliability_guard(maximum_memory_bytes=memory_bytes)
    exec_globals: dict = {}
    try:
        with swallow_io():
            exec(code, exec_globals)  # noqa: S102 - the point of this module
            fn = exec_globals[entry_point]
        for i, inp in enumerate(inputs):
            try:
                with time_limit(time_limits[i]):
                    with swallow_io():
                        out = fn(*inp)
                    payload = verdict.encode(out)  # under the time limit too: a huge output is a failed input
            except BaseException:
                record(i, verdict.REC_ERROR)
                if fast_check:
                    raise
                continue
            record(i, verdict.REC_OUTPUT, payload)
        struct.pack_into("i", shm, 0, _SUCCESS)
    except BaseException:
        struct.pack_into("i", shm, 0, _FAILED)


def untrusted_check(dataset: str, code: str, inputs: list, entry_point: str, expected, atol, ref_time: list,
                    fast_check: bool = False, min_time_limit: float = 1.0, gt_time_limit_factor: float = 4.0,
                    memory_bytes: int | None = None) -> tuple[str, list[bool], dict]:
    """(status, per-input details, sandbox report): ``evalplus.eval.untrusted_check`` in the sandbox.

    Time limits as EvalPlus: ``max(min_time_limit, gt_time_limit_factor * ground-truth time)`` per input, the whole
    run ``min($EVALPLUS_TIMEOUT_PER_TASK or 60, sum) + 1 (+1 without fast_check) + 1`` seconds.  A solution killed
    by the sandbox (seccomp: it tried to start a process or a program) is ``fail``; one killed by the wall-clock
    limit, or dead without a verdict, is ``timeout`` (EvalPlus' mapping).
    """
    if memory_bytes is None:
        from evalplus.eval import query_maximum_memory_bytes

        memory_bytes = query_maximum_memory_bytes()
    time_limits = [max(min_time_limit, gt_time_limit_factor * t) for t in ref_time]
    timeout = min(float(os.environ.get("EVALPLUS_TIMEOUT_PER_TASK", 60)), sum(time_limits)) + 1
    if not fast_check:
        timeout += 1

    def target(shm):
        verdict.forget_secrets(expected)  # this child's copy only: the scorer keeps its own
        _execute(entry_point, code, inputs, time_limits, fast_check, memory_bytes, shm)

    judge = verdict.Judge(dataset, entry_point, inputs, expected, atol, fast_check)

    def watch(shm):  # judge the outputs as they arrive: stop at the first failure under fast_check, as EvalPlus
        count = struct.unpack_from("i", shm, 4)[0]  # read before `used`: the child writes `used` first
        used = max(0, min(struct.unpack_from("i", shm, 28)[0], OUTPUT_BYTES))
        judge.feed(shm, _HDR, _HDR + used, count, live=True)
        return fast_check and not all(judge.details)

    r = run(target, OUTPUT_BYTES, timeout + 1, memory_bytes, watch)
    final = verdict.Judge(dataset, entry_point, inputs, expected, atol, fast_check)  # on the child's last word
    final.feed(r["data"], 0, len(r["data"]), r["progress"])
    details = final.details
    if fast_check and not all(details):
        return FAIL, details, r
    stat = {_SUCCESS: PASS, _FAILED: FAIL}.get(r["stat"])
    if stat is None:
        stat = FAIL if r["signal"] == signal.SIGSYS else TIMEOUT
    if stat == PASS and (len(details) != len(inputs) or not all(details)):
        stat = FAIL
    return stat, details, r
