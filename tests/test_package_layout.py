"""The package's shape (issue 23): one subpackage per concern, no import cycle, no module over 400 lines and no
function over 60 (the DAG's code in workflow/ and analysis/ too), no two modules of one name unless they are the
same idea on two sides.  Static (AST) checks: nothing is imported, so a cycle through a lazy, in-function import
counts as much as one at module level."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "fastdllm_core"
# every Python file held to the size rules: the package, the DAG's library and job scripts, the analysis
SIZED = sorted(p for d in (PKG, ROOT / "workflow", ROOT / "analysis") for p in d.rglob("*.py"))
SUBPACKAGES = ("decoding", "training", "evaluation", "evaluation/sandbox", "synthetic", "bench", "cli", "modeling")
GONE = ("train.py", "train_config.py", "train_init.py", "train_io.py", "configkeys.py", "data.py", "objective.py",
        "evaluation/synthetic", "evaluation/sandbox.py", "evaluation/sandbox_setup.py",
        "evaluation/evalplus_worker.py", "evaluation/verdict.py",
        # renamed so that a name says what the module holds (issue 52)
        "decoding/mdm.py", "decoding/masked.py", "decoding/engine.py", "decoding/stats.py", "training/engine.py",
        "stats.py", "model.py", "config.py", "evaluation/common.py", "bench/runner.py")
# module names the package holds twice on purpose: the same idea on two sides, each docstring names the other
TWO_SIDES = {"dream.py": {"decoding", "modeling"}, "llada.py": {"decoding", "modeling"},
             "roofline.py": {"cli", "bench"}, "__init__.py": None, "__main__.py": None}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its body).  ``from pkg import name`` depends on the
    submodule ``pkg.name`` when there is one, else on ``pkg``."""
    mods = _modules()
    graph = {}
    for mod, path in mods.items():
        here = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                prefix = ".".join(base + ([node.module] if node.module else []))
                names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix for a in node.names]
            else:
                continue
            deps |= {n for n in names if n in mods and n != mod}
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_tree_has_one_subpackage_per_concern():
    missing = [d for d in SUBPACKAGES if not (PKG / d / "__init__.py").is_file()]
    assert not missing, f"fastdllm_core lacks the subpackages {missing}"
    left = [g for g in GONE if (PKG / g).exists()]
    assert not left, f"modules that moved into a subpackage or were renamed are back (a re-export shim?): {left}"


def same_named(paths: list[Path], root: Path) -> dict[str, list[str]]:
    """Module file names held by more than one folder under ``root``: name -> the folders."""
    seen: dict[str, list[str]] = {}
    for p in paths:
        seen.setdefault(p.name, []).append(p.parent.relative_to(root).as_posix())
    return {name: sorted(dirs) for name, dirs in seen.items() if len(dirs) > 1}


def test_no_two_modules_share_a_name_unless_two_sides_of_one_idea():
    dup = same_named(sorted(PKG.rglob("*.py")), PKG)
    odd = {n: d for n, d in dup.items() if n not in TWO_SIDES or TWO_SIDES[n] not in (None, set(d))}
    assert not odd, f"modules of fastdllm_core with the same name in several folders (rename one): {odd}"
    for name, sides in TWO_SIDES.items():
        for side in sides or ():
            other = (sides - {side}).pop()
            doc = ast.get_docstring(ast.parse((PKG / side / name).read_text())) or ""
            assert f"fastdllm_core.{other}.{name[:-3]}" in doc, (
                f"{side}/{name}: its docstring must name its other side, fastdllm_core.{other}.{name[:-3]}")


def test_same_named_finds_a_pair(tmp_path):  # the check above must be able to fail
    for rel in ("a/common.py", "b/common.py", "a/x.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text("")
    assert same_named(sorted(tmp_path.rglob("*.py")), tmp_path) == {"common.py": ["a", "b"]}


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles in fastdllm_core: " + "; ".join(" <-> ".join(c) for c in found)


def test_cycle_finder_finds_a_cycle():  # the check above must be able to fail
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def long_functions(source: str) -> dict[str, int]:
    """Name -> length in lines of every function of ``source`` over :data:`MAX_FUNCTION_LINES`."""
    return {n.name: n.end_lineno - n.lineno + 1 for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1
            > MAX_FUNCTION_LINES}


def test_the_size_rules_cover_the_dag_and_the_analysis():
    names = {p.relative_to(ROOT).as_posix() for p in SIZED}
    assert {"workflow/fastdllm_dag/plan/models.py", "workflow/scripts/bench.py", "analysis/tables.py"} <= names


def test_no_module_over_400_lines():
    big = {str(p.relative_to(ROOT)): n for p in SIZED if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not big, f"modules over {MAX_MODULE_LINES} lines: {big}"


@pytest.mark.parametrize("path", SIZED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_over_60_lines(path):
    long = long_functions(path.read_text())
    assert not long, f"{path.relative_to(ROOT)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_long_functions_finds_one():  # the check above must be able to fail
    def function(lines: int) -> str:
        return "def f():\n" + "".join(f"    x{i} = {i}\n" for i in range(lines - 1))

    assert long_functions(function(MAX_FUNCTION_LINES + 1)) == {"f": MAX_FUNCTION_LINES + 1}
    assert long_functions(function(MAX_FUNCTION_LINES)) == {}
