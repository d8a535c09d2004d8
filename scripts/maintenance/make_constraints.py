"""Write constraints.txt: the exact installed versions of the project's dependency closure (pyproject.toml's
dependencies with their extras, followed recursively through the installed packages' metadata), i.e. the package
set CI tested.  Run in the environment CI passed in:  python scripts/maintenance/make_constraints.py > constraints.txt
"""
from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def closure(requirements: list[str]) -> dict[str, str]:
    """{canonical name: installed version} of ``requirements`` and everything they require (markers evaluated
    for this interpreter, extras followed)."""
    env, seen, todo = default_environment(), {}, [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            sys.exit(f"{req.name} (required by the project) is not installed: install the project first")
        extras = set(req.extras)
        key = (name, frozenset(extras))
        if key in seen:
            continue
        seen[key] = dist.version
        for sub in dist.requires or []:
            r = Requirement(sub)
            if r.marker is None or any(r.marker.evaluate({**env, "extra": e}) for e in (extras or {""})):
                todo.append(r)
    return {name: v for (name, _), v in seen.items()}


def main() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = closure(deps)
    print("# The package set CI tested (scripts/maintenance/make_constraints.py from its environment); used by "
          ".ci/run:")
    print("#   pip install -c constraints.txt -e .")
    print("# local version labels dropped (torch==2.13.0 matches the CPU and the CUDA builds alike)")
    for name in sorted(pins):
        print(f"{name}=={Version(pins[name]).public}")


if __name__ == "__main__":
    main()
