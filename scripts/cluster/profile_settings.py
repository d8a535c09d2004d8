"""The settings Snakemake resolves for a run with ``--profile <profile>``: what ``snakemake.cli.parse_args`` (the
parsing ``snakemake`` itself runs) makes of the explicit profile and the workflow profile profiles/default that
is loaded beside it (its values win key by key; tests/test_profiles.py).  One YAML document per profile, the
resources as written (``raw``: an expression stays an expression), the other settings as resolved values.

    python scripts/cluster/profile_settings.py profiles/slurm profiles/slurm-rehearsal   # in the repository root

scripts/cluster/slurm_rehearsal.sh writes its output to evidence/profile_settings.txt."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import sys
from pathlib import Path

import yaml

# the settings a cluster run depends on (the scheduler, submission and retry behaviour), beside the resources
SETTINGS = ("executor", "jobs", "cores", "latency_wait", "retries", "rerun_incomplete", "show_failed_logs",
            "printshellcmds", "keep_going", "slurm_init_seconds_before_status_checks", "slurm_keep_successful_logs")


def _plain(v):
    if v is dataclasses.MISSING:
        return "(unset: the executor plugin's default)"
    return v if v is None or isinstance(v, (bool, int, float, str)) else str(v)


def _resource(r):
    if getattr(r, "raw", None) is not None:
        return _plain(r.raw)
    return "(Snakemake's default, evaluated per job)" if r.is_evaluable() else _plain(r.value)


def _resources(res: dict | None) -> dict:
    return {k: _resource(r) for k, r in (res or {}).items()}


def resolved(profile: str) -> dict:
    """The resolved settings of ``snakemake -n --profile <profile>`` run in the current directory."""
    from snakemake.cli import parse_args

    if not (Path(profile) / "config.yaml").is_file():
        raise SystemExit(f"profile {profile!r}: no {profile}/config.yaml (run in the repository root)")
    with contextlib.redirect_stderr(io.StringIO()):  # "Using profiles ...": the one line parse_args prints
        _, args = parse_args(["-n", "--profile", profile])
    out = {k: _plain(getattr(args, k, None)) for k in SETTINGS}
    out["profiles"] = [str(p) for p in (args.profile or [])] + ["profiles/default (workflow profile)"]
    out["default-resources"] = _resources(args.default_resources)
    out["set-resources"] = {rule: _resources(res) for rule, res in (args.set_resources or {}).items()}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+", help="profile directories, e.g. profiles/slurm")
    for i, profile in enumerate(ap.parse_args(argv).profiles):
        if i:
            print("---")
        print(f"# snakemake --profile {profile}: the settings Snakemake resolves")
        yaml.safe_dump(resolved(profile), sys.stdout, sort_keys=False, default_flow_style=None, width=120)


if __name__ == "__main__":
    main()
