"""The two test tiers (issue 69): which tests are slow, decided from their code, and the fast tier's guard against
starting a process.  Used by tests/conftest.py, whose docstring states the rule; tested by tests/test_tiers.py.

:class:`Rule` reads a test's code (its function, the fixtures it requests and every helper either reaches,
as long as the helper is defined under tests/) as an AST: docstrings and comments do not count, a helper in
another test module or a fixture in conftest.py does.  :class:`SpawnGuard` replaces every way Python starts a
process (``subprocess``'s fork, ``os.fork``/``forkpty``/``posix_spawn``/``system``, ``_posixsubprocess.fork_exec``
that multiprocessing's spawn and forkserver use) while a fast test runs, and records each attempt, so that a
process started by library code the static rule cannot see (the sandbox, torch.compile's g++) fails the test even
when the library catches the error; only :data:`ALLOWED` read-only queries pass."""
from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# calls that run snakemake, train a model or start a process: ``smk(...)`` (conftest), ``loop.train(...)``,
# ``train_processes(...)``, ``Popen(...)``
SLOW_CALLS = {"smk", "train", "train_processes", "Popen"}
# names whose mere use means processes: a module imported or used, an executor, os.fork
SLOW_NAMES = {"subprocess", "multiprocessing", "ProcessPoolExecutor", "Popen", "fork", "forkpty", "posix_spawn"}
# string constants: a torchrun command line; ``["train", ...]`` as an argument list is ``fastdllm train``
SLOW_ARGV0 = {"train", "torchrun", "snakemake"}
# modules whose use starts processes, reached through any name (``import subprocess as sp``; ``from os import fork``)
SLOW_MODULES = ("subprocess", "multiprocessing", "concurrent.futures.process", "_posixsubprocess")
SLOW_OBJECTS = {getattr(os, n) for n in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system") if hasattr(os, n)}


def _own(obj) -> bool:
    """Is ``obj`` (a function, class or module) defined in a file under tests/ (this one, the rule's own code that
    names what it looks for, aside)?"""
    try:
        f = inspect.getsourcefile(obj)
    except TypeError:
        return False
    return bool(f) and Path(f).resolve().is_relative_to(TESTS) and Path(f).resolve() != Path(__file__).resolve()


def _tree(obj) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError):
        return None


def direct_reason(tree: ast.AST) -> str | None:
    """Why the code of ``tree`` itself (not its helpers) is slow, or None."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in SLOW_CALLS:
                return f"calls {name}()"
        elif isinstance(n, ast.Name) and n.id in SLOW_NAMES:
            return f"uses {n.id}"
        elif isinstance(n, ast.Attribute) and n.attr in SLOW_NAMES:
            return f"uses .{n.attr}"
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in n.names] + ([n.module] if isinstance(n, ast.ImportFrom) and n.module else [])
            hit = [m for m in names if m.split(".")[0] in SLOW_NAMES or m.split(".")[-1] in SLOW_NAMES]
            if hit:
                return f"imports {hit[0]}"
        elif isinstance(n, (ast.List, ast.Tuple)) and n.elts and isinstance(n.elts[0], ast.Constant):
            first = n.elts[0].value
            if isinstance(first, str) and first.split(" ")[0] in SLOW_ARGV0:
                return f"runs {first!r} (a command line)"
    return None


def _slow_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in SLOW_MODULES)


def alias_reason(tree: ast.AST, namespace: dict) -> str | None:
    """Why ``tree`` is slow through a name of ``namespace`` (its module's globals) that is a process-starting
    module or function under another name, or None."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in namespace:
            obj = namespace[n.id]
            if isinstance(obj, types.ModuleType) and _slow_module(obj.__name__):
                return f"uses {n.id} (module {obj.__name__})"
            try:
                hit = obj in SLOW_OBJECTS or _slow_module(getattr(obj, "__module__", None) or "")
            except TypeError:  # unhashable
                hit = False
            if hit and not isinstance(obj, types.ModuleType):
                return f"uses {n.id} ({getattr(obj, '__module__', '')}.{getattr(obj, '__name__', '')})"
    return None


def _referenced(tree: ast.AST, namespace: dict, owner: type | None) -> list:
    """The functions, classes and methods under tests/ that ``tree`` names: ``helper``, ``module.helper``,
    ``self.helper`` (in a method of ``owner``)."""
    out = []
    for n in ast.walk(tree):
        obj = None
        if isinstance(n, ast.Name):
            obj = namespace.get(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            base = owner if n.value.id in ("self", "cls") and owner is not None else namespace.get(n.value.id)
            if isinstance(base, (types.ModuleType, type)):
                obj = getattr(base, n.attr, None)
        obj = inspect.unwrap(obj) if callable(obj) else obj
        if isinstance(obj, (types.FunctionType, type)) and _own(obj):
            out.append(obj)
    return out


class Rule:
    """:func:`slow_reason` with a memo per function, class and fixture (a module's tests share helpers)."""

    def __init__(self):
        self.memo: dict[object, str | None] = {}

    def reason(self, obj, owner: type | None = None) -> str | None:
        """Why ``obj`` (a test function, fixture function, helper or class under tests/) is slow, following the
        helpers it names; None when fast."""
        key = (obj, owner)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = None  # a cycle of helpers adds nothing
        tree = _tree(obj)
        why = direct_reason(tree) if tree is not None else None
        if why is None and tree is not None:
            namespace = vars(sys.modules[obj.__module__]) if obj.__module__ in sys.modules else {}
            why = alias_reason(tree, namespace)
        if why is None and tree is not None:
            cls = obj if isinstance(obj, type) else owner
            for ref in _referenced(tree, namespace, cls):
                if (sub := self.reason(ref, cls if not isinstance(ref, type) else None)) is not None:
                    why = f"{sub} (via {ref.__qualname__})"
                    break
        self.memo[key] = why
        return why

    def item_reason(self, item) -> str | None:
        """Why the collected test ``item`` is slow: its module's top level, its function, or a fixture it
        requests (fixtures defined under tests/, conftest.py's included)."""
        fn = getattr(item, "function", None)
        if fn is None:
            return None
        owner = getattr(item, "cls", None)
        if (why := self.reason(inspect.unwrap(fn), owner)) is not None:
            return why
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        for name in item.fixturenames:
            for fdef in defs.get(name, ()):
                func = inspect.unwrap(fdef.func)
                if _own(func) and (why := self.reason(func)) is not None:
                    return f"fixture {name} {why}"
        return None


# the only processes a fast test may start: read-only queries of the environment that libraries make on their own,
# a few milliseconds each (provenance and lm-eval: the commit; platform.processor(): ``uname -p``; snakemake's SLURM
# plugin, at import: ``which sacct``)
ALLOWED = {"git": {"rev-parse", "describe", "status"}, "which": None, "uname": None}


def allowed(argv: list[str]) -> bool:
    """Is ``argv`` one of :data:`ALLOWED` (a program, and the subcommands allowed, None for any)?"""
    if not argv or (prog := os.path.basename(argv[0])) not in ALLOWED:
        return False
    subs = ALLOWED[prog]
    return subs is None or (len(argv) > 1 and argv[1] in subs)


SPAWNS = pytest.StashKey[list]()  # on a test item: its guards (one a phase), with what each stopped
REPORTED = pytest.StashKey[bool]()


class SpawnGuard:
    """While active, every attempt to start a process raises :class:`SpawnInFastTest` and is recorded in
    :attr:`attempts` (kept even when library code catches the error, so the caller can still fail the test)."""

    def __init__(self, test: str):
        self.test = test
        self.attempts: list[str] = []
        self._saved: list[tuple[object, str, object]] = []

    def _blocker(self, what: str, original):
        def blocked(*args, **kwargs):
            detail = what
            if what == "subprocess":  # Popen._execute_child(self, args, executable, ...)
                argv = args[1] if isinstance(args[1], (list, tuple)) else str(args[1]).split()
                argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in argv]
                if allowed(argv):
                    return original(*args, **kwargs)
                detail = f"subprocess {argv[:4]}"
            self.attempts.append(detail)
            raise SpawnInFastTest(message(self.test, detail))
        return blocked

    def __enter__(self):
        import _posixsubprocess

        targets = [(subprocess.Popen, "_execute_child", "subprocess"), (_posixsubprocess, "fork_exec", "fork_exec")]
        targets += [(os, n, f"os.{n}") for n in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system",
                                                 "spawnv", "spawnve", "spawnvp", "spawnvpe") if hasattr(os, n)]
        for obj, name, what in targets:
            self._saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, self._blocker(what, getattr(obj, name)))
        return self

    def __exit__(self, *exc):
        for obj, name, original in reversed(self._saved):
            setattr(obj, name, original)
        self._saved.clear()
        return False


class SpawnInFastTest(RuntimeError):
    """A test of the fast tier tried to start a process."""


def message(test: str, what: str) -> str:
    return (f"{test} started a process ({what}) but is in the fast tier: a test that starts a process, runs "
            "snakemake or trains is slow. Mark it @pytest.mark.slow (or call the spawning code through a name "
            "the rule in tests/conftest.py sees).")
