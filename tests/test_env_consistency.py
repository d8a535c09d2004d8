"""environment.yml and pyproject.toml declare the same dependencies (names and version specifiers)."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _norm(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*(.*)$", req)
    assert m, req
    return m[1].lower().replace("_", "-"), m[2].replace(" ", "")


def test_environment_matches_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    options = [p for p in pip if p.startswith("-")]
    pip = [p for p in pip if not p.startswith("-")]
    assert "-c constraints.txt" in options and "-e ." in options  # the versions CI tested, and the project
    assert dict(map(_norm, py)) == dict(map(_norm, pip))
    py_req = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f"python{py_req}" in env["dependencies"]


def test_ci_script_installs_pinned_torch_first_and_runs_readme_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci
    assert ci.index("torch==2.13.0") < ci.index("pip install -c constraints.txt -e .")
    # the two tiers, fast first, each test once: no other pytest command (the whole suite would run twice)
    runs = [line.split(" ||")[0] for line in ci.splitlines() if line.startswith("python -m pytest")]
    assert runs == ['python -m pytest -q -m "not slow"', "python -m pytest -q -m slow"], runs
    readme = (ROOT / "README.md").read_text()
    assert 'python -m pytest -q -m "not slow"' in readme and "\npython -m pytest -q " in readme


def _constraints() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and name == name.strip().lower(), line  # exact pins of canonical names only
            out[name] = version
    return out


def test_constraints_pin_every_dependency_within_pyproject():
    """constraints.txt (the set CI tested) pins each direct dependency at a version pyproject.toml allows, and
    torch at the version .ci/run installs first."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = _constraints()
    for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(dep)
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt has no pin for {name}"
        assert req.specifier.contains(pins[name], prereleases=True), (name, pins[name], str(req.specifier))
    assert pins["torch"] == "2.13.0"
