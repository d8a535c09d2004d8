"""The CPU kernels' instruction set is pinned before torch runs (fastdllm_core.cpu_numerics)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastdllm_core import cpu_numerics

ROOT = Path(__file__).resolve().parent.parent
needs_avx2 = pytest.mark.skipif(not cpu_numerics.can_pin(), reason="this CPU cannot take the AVX2 path")


@needs_avx2
def test_pin_sets_what_is_missing_and_keeps_what_the_user_set():
    env = {"MKL_CBWR": "COMPATIBLE"}
    added = cpu_numerics.pin(env)
    assert env["MKL_CBWR"] == "COMPATIBLE" and "MKL_CBWR" not in added
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert cpu_numerics.pin(env) == {}  # idempotent


def test_native_opts_out():
    env = {"FASTDLLM_CPU_ISA": "native"}
    assert cpu_numerics.pin(env) == {} and set(env) == {"FASTDLLM_CPU_ISA"}


@needs_avx2
def test_the_suite_runs_pinned_and_rows_say_so():
    import torch

    from fastdllm_core.provenance import run_metadata

    assert os.environ["MKL_CBWR"] == "AVX2" and torch.backends.cpu.get_cpu_capability() == "AVX2"
    meta = run_metadata()
    assert meta["cpu_isa"] == "AVX2" and meta["mkl_cbwr"] == "AVX2"


def _child_capability(code: str, env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=ROOT)
    return out.stdout.strip().splitlines()[-1]


@needs_avx2
def test_dag_jobs_pin_before_torch_loads():
    """workflow/fastdllm_dag/job/log.logged (every DAG job) pins in a process that starts unpinned; a variable the
    user set (here: ATen's generic path) wins, and torch then really runs that path."""
    env = {k: v for k, v in os.environ.items() if k not in cpu_numerics.PINNED}
    code = ("import types; from fastdllm_dag.job.log import logged\n"
            "sm = types.SimpleNamespace(log=[], threads=1, rule='x')\n"
            "with logged(sm):\n    import os, torch\n"
            "    print(os.environ['MKL_CBWR'], torch.backends.cpu.get_cpu_capability())")
    assert _child_capability(code, env) == "AVX2 AVX2"
    assert _child_capability(code, dict(env, ATEN_CPU_CAPABILITY="default")) == "AVX2 DEFAULT"
