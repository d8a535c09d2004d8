"""Shared fixtures, and the two test tiers (issue 69).

The fast tier, ``python -m pytest -q -m "not slow"``, is the everyday command; the full suite, ``python -m pytest
-q``, adds the slow tier (``-m slow``; .ci/run runs the two tiers, each test once).  A test is slow when it runs
snakemake, trains a model or starts a process.  Two mechanisms keep the ``slow`` mark true (code: tests/tiers.py;
tested by tests/test_tiers.py):

- **The rule, at collection** (:func:`pytest_collection_modifyitems`).  A test is marked slow when its function, a
  fixture it requests, or a helper either names (followed through functions, classes and methods defined under
  tests/, conftest.py's ``smk`` included; through aliases such as ``import subprocess as sp``) calls ``smk(``,
  ``train(``, ``train_processes(`` or ``Popen(``; names ``subprocess``, ``multiprocessing``,
  ``ProcessPoolExecutor``, ``fork`` or ``posix_spawn``; or builds a command line starting with ``train``
  (``fastdllm train``), ``torchrun`` or ``snakemake``.  The code is read as an AST: docstrings and comments do not
  count.  The mark keeps the reason (``item.get_closest_marker("slow").kwargs["reason"]``).
- **The guard, at run time** (the ``pytest_runtest_*`` wrappers below).  A test not marked slow runs its setup,
  call and teardown under :class:`tiers.SpawnGuard`: ``subprocess.Popen``'s fork, ``os.fork``/``forkpty``/
  ``posix_spawn``/``system``/``spawn*`` and ``_posixsubprocess.fork_exec`` (multiprocessing's spawn) raise, and
  the attempt is recorded, so the test fails with a message naming it and saying it must be slow, even when the
  library catches the error.  This catches what the rule cannot see, a process started inside the library (the
  sandbox, torch.compile's g++, lm-eval's ``pip list``): such a test carries ``@pytest.mark.slow(reason=...)`` by
  hand, and forgetting it fails the test in either tier.  Only read-only queries that libraries make on their own,
  a few milliseconds each, are let through (``git rev-parse``/``describe``/``status``, ``uname``, ``which``:
  ``tiers.ALLOWED``).  Patching only inside a test's own phases leaves pytest, imports and collection alone; a slow
  test is never patched.  Tests of a few seconds that start nothing (decoding equivalences, report rebuilds) stay
  fast: with them the fast tier took 150 s on 2 busy cores (load 2.4-3.4), against 20-35 minutes for the whole.
"""
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from fastdllm_core import cpu_numerics

cpu_numerics.pin()  # before torch's first kernel: the same bits on every x86 CPU with AVX2

import pytest  # noqa: E402
import torch  # noqa: E402

import tiers  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(min(2, torch.get_num_threads()))

ROOT = Path(__file__).resolve().parents[1]


def smk(*args, cwd=ROOT, timeout=300, env=None):
    """``python -m snakemake *args`` in ``cwd`` (the repository), output captured; the Hub and datasets offline
    unless ``env`` (the whole environment) is given."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1") if env is None else env
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture
def hub_offline(monkeypatch):
    """The Hub and the datasets library offline for one test (whatever an earlier test set)."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def make_tiny(seed=0, dtype=torch.float64, attn="sdpa", vocab_size=64, init_range=0.3, **cfg):
    """A tiny random Qwen2 whose greedy outputs are diverse (large init range), mask token id 3, eos 2."""
    from fastdllm_core.tiny import tiny_model, tiny_qwen2_config

    config = tiny_qwen2_config(vocab_size=vocab_size, initializer_range=init_range, **cfg)
    model = tiny_model(config, seed=seed, dtype=dtype, attn_implementation=attn)
    model.config.mask_token_id = 3
    return model


def tiny_eval_setup(tmp_path_factory, name: str, n_eval: int):
    """(loaded tiny checkpoint, synthetic suite with ``n_eval`` test items per task, their directory): what the
    evaluation tests run on (tests/test_eval_e2e.py, tests/test_eval_shards.py)."""
    from fastdllm_core import synthetic
    from fastdllm_core.loading import load_model
    from fastdllm_core.tiny import write_tiny_checkpoint

    root = tmp_path_factory.mktemp(name)
    ck = write_tiny_checkpoint(root / "ck", seed=0)
    suite = synthetic.write_suite(root / "suite", n_pretrain=0, n_sft=20, n_adapt=0, n_eval=n_eval)
    return load_model(str(ck)), suite, root


@pytest.fixture(scope="session")
def tiny_bench_inputs(tmp_path_factory):
    """(a tiny checkpoint, a synth_arith test file of 4 items): what the sweep job's test runs on
    (tests/test_bench_rounds.py); read only."""
    from fastdllm_core import synthetic
    from fastdllm_core.tiny import write_tiny_checkpoint

    root = tmp_path_factory.mktemp("bench_inputs")
    ck = write_tiny_checkpoint(root / "ck", seed=0)
    suite = synthetic.write_suite(root / "suite", n_pretrain=0, n_sft=4, n_adapt=0, n_eval=4)
    return ck, suite["synth_arith_test"]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    """A small SFT file (64 sums, prompt/response rows) for the training tests that run a few real steps."""
    p = tmp_path_factory.mktemp("data") / "sft.jsonl"
    p.write_text("\n".join(json.dumps({"prompt": f"{a}+{b}=?", "response": f"{a + b}"})
                           for a in range(8) for b in range(8)))
    return str(p)


@pytest.fixture(scope="session")
def tiny64():
    return make_tiny()


@pytest.fixture(scope="session")
def tokenizer():
    from fastdllm_core.tiny import char_tokenizer

    return char_tokenizer()


# ------------------------------------------------------------------------------------------------ stored numerics
def pytest_addoption(parser):
    group = parser.getgroup("numerics", "stored numerics (tests/test_numerics_*.py)")
    group.addoption("--update-numerics", action="store_true", default=False,
                    help="rewrite the stored values of tests/data/numerics/*.json that moved (or are new) instead "
                         "of failing; prints old vs new; needs --reason")
    group.addoption("--reason", default=None,
                    help="why the numerics changed (recorded with the commit in every rewritten entry)")


def pytest_configure(config):
    if config.getoption("--update-numerics") and not (config.getoption("--reason") or "").strip():
        raise pytest.UsageError('--update-numerics needs --reason "..." (why the numerics changed; recorded in '
                                "the stored file beside the commit)")


def pytest_sessionfinish(session):
    if session.config.getoption("--update-numerics"):
        import numerics_check

        numerics_check.write_pending()


def pytest_terminal_summary(terminalreporter, config):
    if config.getoption("--update-numerics"):
        import numerics_check

        terminalreporter.section("stored numerics (--update-numerics)")
        for line in numerics_check.report_lines() or ["nothing compared (no test_numerics_* test ran)"]:
            terminalreporter.write_line(line)


# ------------------------------------------------------------------------------------------------ the two tiers
_RULE = tiers.Rule()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by mark
def pytest_collection_modifyitems(config, items):
    """Mark slow every test the rule of tests/tiers.py finds (see this module's docstring); keep the reason."""
    for item in items:
        if item.get_closest_marker("slow") is None and (why := _RULE.item_reason(item)) is not None:
            item.add_marker(pytest.mark.slow(reason=why))


def _guarded(item):
    """A context for one phase of ``item``: the spawn guard for a fast test, nothing for a slow one."""
    if item.get_closest_marker("slow") is not None:
        return contextlib.nullcontext()
    guard = tiers.SpawnGuard(item.nodeid)
    item.stash.setdefault(tiers.SPAWNS, []).append(guard)
    return guard


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A fast test that tried to start a process fails, whatever the code under test did with the error."""
    report = yield
    tried = [a for g in item.stash.get(tiers.SPAWNS, []) for a in g.attempts]
    if tried and not item.stash.get(tiers.REPORTED, False):
        item.stash[tiers.REPORTED] = True
        why = tiers.message(item.nodeid, "; ".join(dict.fromkeys(tried)))
        report.longrepr = f"{why}\n\n{report.longrepr}" if report.failed else why
        report.outcome = "failed"
    return report
