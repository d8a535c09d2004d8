"""CPU results that do not depend on which x86 machine ran them: the kernels' instruction set, pinned.

On the CPU, torch's matrix products come from MKL and its element-wise and reduction kernels (softmax, norms,
attention) from ATen's vectorised code, and both pick their code path at run time from the CPU: AVX2 on one
machine, AVX-512 on another.  The paths sum in different orders, so the same training run gives different bits on
two machines.  On this project's machines that is not a rounding detail: changing only the kernel path (``MKL_CBWR=
COMPATIBLE`` instead of the default AVX2 path; same code, data and seed) changed the weights after the first step,
and after the AR base's 900 steps of pretraining and instruct tuning its accuracies moved by several points
(docs/reproducibility.md, "Why CPU results differ").

:func:`pin` fixes the path before torch runs its first kernel: ``MKL_CBWR=AVX2`` (MKL's conditional numerical
reproducibility: the AVX2 path on every CPU that has it), ``ATEN_CPU_CAPABILITY=avx2`` and
``ONEDNN_MAX_CPU_ISA=AVX2``.  A value the user set is kept (``FASTDLLM_CPU_ISA=native`` leaves the machine's own
choice, for speed).  Where the CPU has no AVX2, or is not x86, nothing is pinned and the rows say so
(:func:`describe`).  The DAG's jobs pin in ``workflow/fastdllm_dag/job/log.py``, the command line in
``fastdllm_core.cli``, the test suite in ``tests/conftest.py``; child processes (``torchrun``) inherit it.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

PINNED = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
OPT_OUT = "FASTDLLM_CPU_ISA"  # "native": leave the kernels' choice to the machine


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def can_pin() -> bool:
    """x86-64 with AVX2 and FMA (what MKL's and ATen's AVX2 paths need)."""
    return platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= _cpu_flags()


def pin(environ=None) -> dict[str, str]:
    """Set the variables of :data:`PINNED` that are not set yet (before torch's first kernel); returns what was set.
    Does nothing with ``FASTDLLM_CPU_ISA=native`` or on a CPU that cannot take the AVX2 path."""
    env = os.environ if environ is None else environ
    if env.get(OPT_OUT, "").strip().lower() == "native" or not can_pin():
        return {}
    added = {k: v for k, v in PINNED.items() if k not in env}
    env.update(added)
    return added


def describe() -> dict[str, str]:
    """The kernel path in use, for the rows' provenance: ``cpu_isa`` (ATen's capability, e.g. ``AVX2``) and
    ``mkl_cbwr`` (empty when not pinned: the machine chose)."""
    import torch

    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except (AttributeError, RuntimeError):  # pragma: no cover - old torch
        cap = ""
    return {"cpu_isa": str(cap), "mkl_cbwr": os.environ.get("MKL_CBWR", "")}
