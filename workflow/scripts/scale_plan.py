"""The scale study's plan for this run (bases built, snapshots made, estimated training time), refused before any
training when the estimate exceeds scale_study.ceiling_hours (workflow/lib/plan_scale.check_ceiling)."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import json

    import plan_scale
    from fastdllm_core.provenance import write_text_atomic

    sm = snakemake  # noqa: F821
    est = plan_scale.check_ceiling(sm.config)
    plan = {"built_bases": plan_scale.built_sizes(sm.config), "snapshots": sorted(plan_scale.todo(sm.config)),
            "estimate_hours": est,
            "params": plan_scale.params_of(sm.config)}
    print(f"scale study: {len(plan['snapshots'])} snapshots and {len(plan['built_bases'])} bases to make, estimated "
          f"{est['wall']:.1f} h on {sm.config['scale_study'].get('cores', 1)} cores")
    write_text_atomic(sm.output[0], json.dumps(plan, indent=1) + "\n")
