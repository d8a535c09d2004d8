"""The documents' commands run, and the paths they name exist (issue 69).

Every fenced code block of README.md and docs/*.md labelled ``bash``, ``sh``, ``console`` or unlabelled is read
line by line (backslash continuations joined, ``# comments`` and leading ``VAR=value`` assignments dropped, a
``$ `` prompt stripped); a line is checked by its first word:

* ``snakemake ...``: dry-run as written (``-n --nolock`` added; its ``--configfile``, ``--profile``, targets and
  ``--config`` kept; a dry run submits nothing, so the SLURM and GPU profiles dry-run on a laptop).  A line whose
  comment says ``refused: "<message ...>"`` must fail with that message (where a rule refuses, the line runs up to
  that rule: ``REFUSED_BY_RULE``).  Slow: one test per line, id file:line.
* ``fastdllm <sub> ...``: the sub-command exists and every ``--flag`` of the line is an option of its argparse
  parser (fastdllm_core/cli/, read in-process); ``[...]`` marks optional parts and is read through.  A line
  ``fastdllm <sub>: message`` is a printed message, not a command.
* ``python scripts/...`` / ``bash scripts/...``: the file exists; a Python script answers ``--help`` with exit 0
  and its help names every ``--flag`` of the line (slow: one process per script); a shell script's text names
  every ``--flag`` of the line.
* Other lines (pip, export, pytest, shell loops, listings, printed output) are not checked.

Paths: every repository path (``scripts/ docs/ workflow/ fastdllm_core/ tests/ config/ results/ profiles/
analysis/``) named in README.md, docs/*.md, config/*.yaml comments, tests/data/**, profiles/*/config.yaml comments
and the comments and docstrings of workflow/**/*.py and *.smk exists, and so does every dotted name
``fastdllm_core.a.b`` there (a module, or an attribute of one; ``workflow/fastdllm_dag/plan/models.train_nodes``
likewise names ``train_nodes`` of workflow/fastdllm_dag/plan/models.py).  Not checked, by rule: a path with a
placeholder (``<``, ``{``, ``*``, ``...``), a path git ignores (``git check-ignore``: the outputs a run writes, e.g.
results/tiny/...), a path assigned to a variable (``OUT=results/gpu/x``: where a command is told to write), and
tests/data's stored copy of a page at a commit (``SNAPSHOTS``: its names are that commit's).  ``<commit>:path`` (git's
rev:path) names a file at that commit: checked with ``git cat-file -e`` (how the docs cite a removed script).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import io
import re
import shlex
import subprocess
import sys
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import ROOT, smk

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SHELL_LABELS = {"", "bash", "sh", "console", "shell"}
OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")  # CommonMark: no backtick in a backtick fence's info

# snakemake lines whose dry run cannot work here, with the reason; keep it short (none needed at present)
DRY_RUN_ALLOWED_TO_FAIL: dict[str, str] = {}
# targets whose documented refusal is a rule's, which a dry run plans but does not execute: such a line runs for
# real up to that rule (`--until`), in the tree, whose committed rows the estimate reads; a refusing rule writes
# only its log (under the ignored results/tiny/logs/)
REFUSED_BY_RULE = {"scale_study": "scale_plan"}


def _blocks(page: Path):
    """(first line number, [(line number, line)]) of each shell (or unlabelled) fenced block of ``page``."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, label = m.group(1), m.group(2).lower()
        body, j = [], i + 1
        while j < len(lines) and not re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$", lines[j]):
            body.append((j + 1, lines[j]))
            j += 1
        if label in SHELL_LABELS:
            yield i + 1, body
        i = j + 1


def _commands(page: Path):
    """(line number, words, comment) of every command line of ``page``'s shell blocks."""
    for _, body in _blocks(page):
        k = 0
        while k < len(body):
            n, text = body[k]
            while text.rstrip().endswith("\\") and k + 1 < len(body):
                k += 1
                text = text.rstrip()[:-1] + " " + body[k][1]
            k += 1
            text = re.sub(r"^\s*\$\s+", "", text)
            comment = ""
            lex = shlex.shlex(text, posix=True, punctuation_chars=False)
            lex.whitespace_split = True
            lex.commenters = ""
            try:
                words = []
                for w in lex:
                    if w.startswith("#"):
                        comment = text[text.index(w):]  # the rest of the line
                        break
                    words.append(w)
            except ValueError:  # an unbalanced quote: not a command
                continue
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words.pop(0)
            if words:
                yield n, words, comment


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _lines(first_word: str):
    out = []
    for page in PAGES:
        for n, words, comment in _commands(page):
            if words[0] == first_word:
                out.append(pytest.param(words, comment, id=f"{_rel(page)}:{n}"))
    return out


SNAKEMAKE = _lines("snakemake")
FASTDLLM = [p for p in _lines("fastdllm") if not (len(p.values[0]) > 1 and p.values[0][1].endswith(":"))]
SCRIPTS = [p for w in ("python", "bash") for p in _lines(w) if len(p.values[0]) > 1
           and p.values[0][1].startswith("scripts/")]


def test_the_reader_finds_the_commands():
    """The block reader sees the documented commands (a fence it misread would make every test here vacuous)."""
    assert len(SNAKEMAKE) >= 15 and len(FASTDLLM) >= 10 and len(SCRIPTS) >= 4
    lines = {p.id.split(":")[0]: [] for p in SNAKEMAKE}
    for p in SNAKEMAKE:
        lines[p.id.split(":")[0]].append(shlex.join(p.values[0]))
    assert "snakemake --cores all" in lines["README.md"]
    assert "snakemake -n paper_figures --configfile config/paper.yaml" in lines["docs/paper_scale.md"]
    assert not any(w[1].endswith(":") for w, _ in (p.values for p in FASTDLLM))  # printed messages are not commands
    assert {"--forced-k", "--thresholds"} <= cli_options("bench") and "--no-such-flag" not in cli_options("bench")
    assert {"--model", "--model_args", "--tasks", "--fastdllm-gsm8k"} <= cli_options("lm-eval")
    assert {"--configfile", "--include-released"} <= cli_options("plan-training")


# ------------------------------------------------------------------------------------------------------ snakemake
@pytest.mark.slow
@pytest.mark.parametrize("words, comment", SNAKEMAKE)
def test_snakemake_line_dry_runs(words, comment, request):
    where = request.node.callspec.id
    refused = re.search(r"refused:\s*\"([^\"]*?)(?:\s*\.\.\..*)?\"", comment)
    rule = next((REFUSED_BY_RULE[w] for w in words if w in REFUSED_BY_RULE), None)
    if refused and rule:
        r = smk(*words[1:], "--until", rule, "--nolock", timeout=600)
    else:
        r = smk(*words[1:], "-n", "--nolock", timeout=600)
    out = r.stdout + r.stderr
    for logs in re.findall(r"^\s*log: (.+)$", out, re.MULTILINE) if refused and rule else []:  # the script's error
        out += "".join((ROOT / f).read_text() for f in logs.split(", ") if (ROOT / f).is_file())
    if refused:
        assert r.returncode != 0 and refused.group(1) in out, \
            f"{where}: documented as refused with {refused.group(1)!r}; exit {r.returncode}:\n{out[-3000:]}"
        return
    if where in DRY_RUN_ALLOWED_TO_FAIL:
        pytest.skip(DRY_RUN_ALLOWED_TO_FAIL[where])
    assert r.returncode == 0, f"{where}: `{shlex.join(words)} -n --nolock` failed:\n{out[-3000:]}"
    assert "This was a dry-run" in out or "Nothing to be done" in out, out[-3000:]


def test_snakemake_configfiles_are_files():
    """``--configfile`` reads every word after it up to the next option as a file: a target written there
    (``--configfile config/paper.yaml train_model``) is taken for a config file.  Fast; the dry runs say it too."""
    bad = []
    for p in SNAKEMAKE:
        words = p.values[0]
        if "--configfile" in words:
            for w in words[words.index("--configfile") + 1:]:
                if w.startswith("-"):
                    break
                if not (ROOT / w).is_file():
                    bad.append(f"{p.id}: {w}")
    assert not bad, "not a config file after --configfile (put targets before it):\n" + "\n".join(bad)


# ------------------------------------------------------------------------------------------------------- fastdllm
class _Captured(Exception):
    pass


@lru_cache(maxsize=None)
def cli_options(sub: str) -> frozenset[str]:
    """The option strings of ``fastdllm <sub>``'s parser: its ``main`` is called with ``parse_args`` intercepted."""
    from fastdllm_core.cli import COMMANDS

    parsers = []

    def capture(self, *args, **kwargs):
        parsers.append(self)
        raise _Captured

    module = importlib.import_module(COMMANDS[sub][0])
    orig = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = capture
    old_argv = sys.argv
    try:
        sys.argv = ["fastdllm", "--help"]
        module.main(["--help"])
    except _Captured:
        pass
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = orig
        sys.argv = old_argv
    assert parsers, f"fastdllm {sub}: no argparse parser reached"
    parser = parsers[0]
    opts = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and "run" in action.choices:
            # lm-eval's own CLI: a command line without a sub-command is `lm-eval run ...`
            opts |= set(action.choices["run"]._option_string_actions)
    if sub == "lm-eval":  # the wrapper's own options (fastdllm_core/cli/lm_eval.py), removed before lm-eval parses
        from fastdllm_core.cli import lm_eval

        opts |= set(re.findall(r'"(--fastdllm-[\w-]+)"', Path(lm_eval.__file__).read_text()))
    return frozenset(opts)


def _flags(words) -> list[str]:
    flags = []
    for w in words:
        w = w.strip("[]")
        if re.match(r"^--[A-Za-z]", w):
            flags.append(w.split("=", 1)[0])
    return flags


@pytest.mark.parametrize("words, comment", FASTDLLM)
def test_fastdllm_line_parses(words, comment):
    from fastdllm_core.cli import COMMANDS

    assert len(words) > 1 and words[1] in COMMANDS, f"no sub-command {words[1:2]}; fastdllm has {sorted(COMMANDS)}"
    unknown = [f for f in _flags(words[2:]) if f not in cli_options(words[1])]
    assert not unknown, f"`fastdllm {words[1]}` has no option {unknown}"


# -------------------------------------------------------------------------------------------------------- scripts
@pytest.mark.slow
@pytest.mark.parametrize("words, comment", SCRIPTS)
def test_script_line(words, comment):
    script = ROOT / words[1]
    assert script.is_file(), f"{words[1]} does not exist"
    if words[0] != "python":  # a shell script: its options are named in its text (usage line, case patterns)
        unknown = [f for f in _flags(words[2:]) if f not in script.read_text()]
        assert not unknown, f"{words[1]} names no {unknown}"
        return
    r = _script_help(words[1])
    assert r.returncode == 0, f"python {words[1]} --help: exit {r.returncode}\n{r.stderr[-2000:]}"
    unknown = [f for f in _flags(words[2:]) if f not in r.stdout]
    assert not unknown, f"python {words[1]} --help names no {unknown}"


@lru_cache(maxsize=None)
def _script_help(rel: str):
    return subprocess.run([sys.executable, rel, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)


# ---------------------------------------------------------------------------------------------------------- paths
TRACKED = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
TOPS = ("scripts", "docs", "workflow", "fastdllm_core", "tests", "config", "results", "profiles", "analysis")
PATH = re.compile(r"(?<![\w./~$-])(?:([0-9a-f]{7,40}):|([A-Z][A-Z0-9_]*)=)?((?:%s)/[\w./<>{}*+-]*)" % "|".join(TOPS))
# stored copies of a page as it was at a commit (the commit in the name): their names are that commit's
SNAPSHOTS = {"tests/data/results_page_fd91a64.md"}
DOTTED = re.compile(r"(?<![\w./-])fastdllm_core(?:\.\w+)+")


def _comments_and_docstrings(path: Path) -> str:
    """The comments and string literals in triple quotes (the docstrings) of a Python or Snakemake file."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING
                                                and re.match(r"^[rRbBuU]{0,2}(\"\"\"|''')", tok.string)):
                out.append(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        out.append(path.read_text())
    if path.suffix == ".py":
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append(ast.get_docstring(node) or "")
    return "\n".join(out)


def _yaml_comments(path: Path) -> str:
    return "\n".join(line[line.index("#"):] for line in path.read_text().splitlines() if "#" in line)


def _sources() -> list[tuple[str, str]]:
    """(file, text to search) of every place whose path references are checked."""
    out = [(_rel(p), p.read_text()) for p in PAGES]
    out += [(f, _yaml_comments(ROOT / f)) for f in TRACKED
            if re.match(r"^(config/[^/]+|profiles/[^/]+/config)\.yaml$", f)]
    out += [(f, (ROOT / f).read_text()) for f in TRACKED if f.startswith("tests/data/") and f not in SNAPSHOTS
            and f.endswith((".json", ".yaml", ".md", ".txt", ".csv"))]
    out += [(f, _comments_and_docstrings(ROOT / f)) for f in TRACKED
            if f == "Snakefile" or (f.startswith("workflow/") and f.endswith((".py", ".smk")))]
    return out


def _ignored(paths: list[str]) -> set[str]:
    if not paths:
        return set()
    r = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(paths),
                       capture_output=True, text=True)
    return set(r.stdout.split())


def _path_problems() -> list[str]:
    found = []  # (where, commit, path)
    for name, text in _sources():
        for n, line in enumerate(text.splitlines(), 1):
            for m in PATH.finditer(line):
                commit, var, p = m.group(1), m.group(2), m.group(3).rstrip(".,:;)'\"`")
                if var or re.search(r"[<{*]|\.\.\.", p) or p.endswith("/."):
                    continue  # OUT=results/gpu/x: where a command is told to write
                found.append((f"{name}:{n}", commit, p))
    ignored = _ignored(sorted({p for _, c, p in found if not c}))
    problems = []
    for where, commit, p in found:
        if commit:
            ok = subprocess.run(["git", "cat-file", "-e", f"{commit}:{p.rstrip('/')}"], cwd=ROOT,
                                capture_output=True).returncode == 0
            if not ok:
                problems.append(f"{where}: {commit}:{p} (no such file at that commit)")
        elif not (ROOT / p).exists() and p not in ignored and p.rstrip("/") not in ignored \
                and not _module_attribute(p):
            problems.append(f"{where}: {p}")
    return problems


def _module_attribute(p: str) -> bool:
    """``workflow/fastdllm_dag/plan/models.py``'s ``train_nodes`` written
    ``workflow/fastdllm_dag/plan/models.train_nodes``: the file defines it."""
    m = re.match(r"^(.+)\.(\w+)$", p)
    if not m or not (ROOT / f"{m.group(1)}.py").is_file():
        return False
    return bool(re.search(rf"^(?:def|class)\s+{m.group(2)}\b|^{m.group(2)}\s*[:=]",
                          (ROOT / f"{m.group(1)}.py").read_text(), re.MULTILINE))


def test_named_paths_exist():
    problems = _path_problems()
    assert not problems, "paths named that do not exist:\n" + "\n".join(problems)


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:k])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            if k == len(parts):
                return True
            obj = importlib.import_module(".".join(parts[:k]))
            for a in parts[k:]:
                if not hasattr(obj, a):
                    return False
                obj = getattr(obj, a)
            return True
    return False


def test_named_modules_exist():
    problems = []
    for name, text in _sources():
        for n, line in enumerate(text.splitlines(), 1):
            for m in DOTTED.finditer(line):
                d = m.group().rstrip(".")
                if not _resolves(d):
                    problems.append(f"{name}:{n}: {d}")
    assert not problems, "modules or names that do not exist:\n" + "\n".join(problems)
