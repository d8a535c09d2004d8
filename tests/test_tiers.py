"""The two test tiers (issue 69; the rule and the guard: tests/conftest.py's docstring, tests/tiers.py).  The fast
tier still imports every module: every module of fastdllm_core/ and analysis/, every library module of
workflow/fastdllm_dag; the job scripts of workflow/scripts (and ``__main__`` modules) run only under snakemake (or as a
command), so they are compiled, not imported."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess as sp  # only in a helper that is never run (the rule must see it through the alias)
import sys
from pathlib import Path

import pytest

import tiers

ROOT = Path(__file__).resolve().parents[1]


def _package_modules(name: str) -> list[str]:
    pkg = importlib.import_module(name)
    return [name] + sorted(m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=f"{name}."))


MODULES = (_package_modules("fastdllm_core") + _package_modules("analysis")
           + _package_modules("fastdllm_dag"))


@pytest.mark.parametrize("name", [m for m in MODULES if not m.endswith(".__main__")])
def test_every_module_of_the_package_and_the_analysis_imports(name):
    assert importlib.import_module(name).__name__ == name


@pytest.mark.parametrize("path", sorted((ROOT / "workflow" / "fastdllm_dag").rglob("*.py")),
                         ids=lambda p: p.relative_to(ROOT / "workflow").as_posix())
def test_every_module_of_the_dag_library_imports(path):  # this checkout's, installed (pip install -e .)
    name = ".".join(path.relative_to(ROOT / "workflow").with_suffix("").parts).removesuffix(".__init__")
    assert Path(importlib.import_module(name).__file__).resolve() == path.resolve()


@pytest.mark.parametrize("path", sorted((ROOT / "workflow" / "scripts").glob("*.py"))
                         + sorted(ROOT.glob("fastdllm_core/**/__main__.py")), ids=lambda p: p.name)
def test_every_job_script_compiles(path):
    compile(path.read_text(), str(path), "exec")


def test_the_walk_finds_the_subpackages():  # the imports above must cover the tree
    assert {"fastdllm_core.training.loop", "fastdllm_core.evaluation.sandbox.worker", "analysis.tables"} <= set(MODULES)
    dirs = ("fastdllm_core", "analysis", "workflow/fastdllm_dag")
    files = {p for d in dirs for p in (ROOT / d).rglob("*.py")}
    assert len(MODULES) == len(files), f"a module under {dirs} is not reached by the walk"


# ------------------------------------------------------------------------------------------------ the rule
def _reason(source: str) -> str | None:
    return tiers.direct_reason(ast.parse(source))


@pytest.mark.parametrize("source", [
    "def test(): smk('-n')",
    "def test(cfg): loop.train(cfg, 'out')",
    "def test(): train_processes(cfg)",
    "def test():\n    import subprocess\n",
    "def test(): os.fork()",
    "def test():\n    with ProcessPoolExecutor(2) as ex: pass",
    "def test(): main(['train', '--config', 'c.yaml'])",
    "def test(): run(('torchrun', '--nproc-per-node', '2'))",
    "def test(): multiprocessing.get_context('fork')",
])
def test_the_rule_finds_each_kind_of_slow_code(source):
    assert _reason(source) is not None, source


@pytest.mark.parametrize("source", [
    'def test():\n    """Runs ``fastdllm train`` and smk( in prose; subprocess too."""\n    # subprocess, train(\n',
    "def test(monkeypatch): monkeypatch.setattr(loop, 'train', fake)",
    "def test(): assert plan.train_config(c)['train']['seed'] == 0",
])
def test_the_rule_ignores_prose_and_lookalikes(source):
    assert _reason(source) is None, source


def _helper_that_spawns():  # never run
    return sp.run(["true"], check=False)


def _caller_of_the_helper():  # never run
    return _helper_that_spawns()


def test_the_rule_follows_helpers_and_aliases():
    caller = vars(sys.modules[__name__])["_caller_of_the_helper"]  # by a string: this test itself stays fast
    why = tiers.Rule().reason(caller)
    assert why is not None and "_helper_that_spawns" in why and "subprocess" in why, why


# ------------------------------------------------------------------------------------------------ the guard
def _hidden(module: str, name: str):
    """``module.name`` found by strings: what the static rule cannot see, so that the guard must."""
    return getattr(importlib.import_module(module), name)


def test_the_guard_stops_and_records_every_way_to_start_a_process():
    starts = {"subprocess": lambda: _hidden("subprocess", "run")(["true"]),
              "os.fork": lambda: _hidden("os", "fork")(), "os.system": lambda: _hidden("os", "system")("true"),
              "fork_exec": lambda: _hidden("_posixsubprocess", "fork_exec")()}
    before = _hidden("os", "fork"), _hidden("subprocess", "Popen")._execute_child  # (this fast test's own guard's)
    for what, start in starts.items():
        with tiers.SpawnGuard("t::x") as guard, pytest.raises(tiers.SpawnInFastTest, match=r"t::x .* fast tier"):
            start()
        assert guard.attempts and guard.attempts[0].startswith(what), (what, guard.attempts)
    assert (_hidden("os", "fork"), _hidden("subprocess", "Popen")._execute_child) == before  # restored on exit


def test_the_guard_is_active_in_a_fast_test(request):
    assert request.node.get_closest_marker("slow") is None
    with pytest.raises(tiers.SpawnInFastTest, match="is in the fast tier"):
        _hidden("subprocess", "run")([sys.executable, "-c", "pass"])
    guard = request.node.stash[tiers.SPAWNS][-1]  # this phase's (the call's) guard recorded it ...
    assert guard.attempts and guard.attempts[0].startswith("subprocess"), guard.attempts
    guard.attempts.clear()  # ... and would fail this test after it returns (conftest's makereport)


def test_this_module_is_fast_but_its_helper_is_not(request):
    assert request.node.get_closest_marker("slow") is None  # the alias at the top does not make the module slow


def test_only_read_only_queries_are_allowed():
    assert tiers.allowed(["/usr/bin/git", "rev-parse", "HEAD"]) and tiers.allowed(["which", "sacct"])
    assert not any(map(tiers.allowed, (["git", "commit"], ["git"], ["g++", "--version"], ["python", "-c", "1"], [])))
