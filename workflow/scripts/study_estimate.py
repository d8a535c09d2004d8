"""A study's plan for this run (bases built, snapshots made, estimated training time), refused before any training
when the estimate exceeds the study's ceiling_hours (workflow/fastdllm_dag/plan/study_rows.check_ceiling)."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import json

    from fastdllm_core.provenance import write_text_atomic
    from fastdllm_dag.plan import study_rows

    st = study_rows.load(sm.config, sm.params.study)
    est = study_rows.check_ceiling(sm.config, st)
    made = {"built_bases": st.built, "snapshots": sorted(st.todo), "estimate_hours": est,
            "params": {k: b["params"] for k, b in st.bases.items()}}
    print(f"{st.name} study: {len(st.todo)} snapshots and {len(st.built)} bases to make, estimated "
          f"{est['wall']:.1f} h on {st.spec.get('cores', 1)} cores")
    write_text_atomic(sm.output[0], json.dumps(made, indent=1) + "\n")
