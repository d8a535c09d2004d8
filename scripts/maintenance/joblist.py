"""The DAG's job list, normalised, for comparing a refactoring's before and after.

    python scripts/maintenance/joblist.py [--configfile config/paper.yaml] [TARGET ...] > joblist.txt
    python scripts/maintenance/joblist.py [--configfile ...] --compare joblist.txt     # exit 1 and a diff if it changed

Builds the DAG the way `snakemake -n --forceall` does (every job of the targets, the default target when none is
given) and prints one line per job: rule, outputs, then every other property a run depends on (inputs, params,
log, threads, resources, priority, message), as sorted JSON, so that two lists compare with `diff`. A last block
lists every rule of the workflow with its output patterns (rule names are what users type). Nothing is run.
"""
import argparse
import contextlib
import difflib
import io
import json
import os
import sys
from pathlib import Path

from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the DAG imports this checkout's fastdllm_core


def _plain(v):
    """JSON-able value of a param / resource (Namedlists, sets and paths become lists and strings)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        items = [_plain(x) for x in v]
        return sorted(items, key=repr) if isinstance(v, (set, frozenset)) else items
    if v is None or isinstance(v, (bool, int, float)):
        return v
    return str(v)


def _named(namedlist):
    names = dict(namedlist._names) if hasattr(namedlist, "_names") else {}
    if names:
        return {k: _plain(getattr(namedlist, k)) for k in sorted(names)}
    return _plain(list(namedlist))


def job_record(job):
    rule = job.rule
    rec = {
        "rule": rule.name,
        "output": sorted(str(f) for f in job.output),
        "input": _named(job.input),
        "params": _named(job.params),
        "log": sorted(str(f) for f in job.log),
        "threads": job.threads,
        "resources": {k: _plain(v) for k, v in sorted(job.resources.items()) if k not in ("_nodes", "tmpdir")},
        "priority": job.priority,
        "message": job.format_wildcards(rule.message) if rule.message else None,
        "script": os.path.basename(rule.script) if rule.script else None,
    }
    return json.dumps(rec, sort_keys=True, default=str)


def joblist(configfiles, targets, cores=2):
    lines, rules = [], []
    with SnakemakeApi(OutputSettings(dryrun=True, quiet={"all"})) as api:
        wf_api = api.workflow(
            resource_settings=ResourceSettings(cores=cores),
            config_settings=ConfigSettings(configfiles=[Path(c) for c in configfiles]),
            snakefile=Path("Snakefile"),
        )
        dag_api = wf_api.dag(DAGSettings(targets=frozenset(targets), forceall=True))
        wf = dag_api.workflow_api._workflow
        wf._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True)
        wf._build_dag()
        wf.dag.update_priority()
        for job in wf.dag.jobs:
            lines.append(job_record(job))
        for rule in wf.rules:
            rules.append(json.dumps({"rule": rule.name, "outputs": [str(o) for o in rule.output]}))
    return sorted(lines) + ["# rules"] + sorted(rules)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configfile", action="append", default=[])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--compare", metavar="FILE", help="compare with a list saved before; exit 1 on a difference")
    ap.add_argument("targets", nargs="*")
    a = ap.parse_args(argv)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # the workflow's own prints (warnings) are not part of the list
        lines = joblist(a.configfile, a.targets, a.cores)
    if not a.compare:
        sys.stdout.write("\n".join(lines) + "\n")
        return 0
    before = Path(a.compare).read_text().splitlines()
    if before == lines:
        print(f"identical: {len(lines)} lines ({', '.join(a.configfile) or 'config/config.yaml'})")
        return 0
    sys.stdout.writelines(difflib.unified_diff([x + "\n" for x in before], [x + "\n" for x in lines],
                                               a.compare, "now"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
