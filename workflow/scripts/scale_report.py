"""The scale study's tidy CSVs, fit, table and figure (analysis/scale_study.py: pure functions of the CSVs)."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    from pathlib import Path

    import plan_budget
    import plan_scale as plan
    import report_specs
    from analysis import scale_study
    from analysis.results_io import load_csvs, measured_on
    from fastdllm_core.provenance import write_csv_atomic, write_text_atomic

    sm = snakemake  # noqa: F821
    config = sm.config
    acc, bases = load_csvs(list(sm.input.accuracy)), load_csvs(list(sm.input.bases))
    speed = load_csvs(list(sm.input.speed), scale_study.SPEED_COLUMNS)
    metrics = load_csvs(list(sm.input.metrics), scale_study.METRICS_COLUMNS)
    write_csv_atomic(sm.output.rows, acc.to_dict("records"))
    summary = scale_study.summarize(acc, speed, metrics, bases, plan.report_columns(config),
                                    plan_budget.report_points(config))
    fits = scale_study.fit(summary)
    write_csv_atomic(sm.output.summary, summary.to_dict("records"))
    write_csv_atomic(sm.output.fit, fits.to_dict("records"))
    have = {Path(f).name.rsplit(".accuracy.csv", 1)[0] for f in sm.input.accuracy}
    missing = [s for s in plan.snapshots(config) if s not in have]
    commits = sorted(set(acc.get("git_commit", []).astype(str))) if len(acc) else []
    provenance = (f"Accuracy {measured_on(acc)}; speed {measured_on(speed)}; code at commit(s) "
                  f"{', '.join(c[:12] for c in commits) or 'n/a'}. The study: {plan.describe(config)}. Regenerate: "
                  "`snakemake --cores all scale_study` (rows under results/scale_study/points are kept; a deleted "
                  "one is remade).")
    threshold = float(config["speed_threshold"])
    labels = {m: report_specs.label(config, m) for m in config["scale_study"]["models"]}  # as on the results page
    text = scale_study.markdown(summary, fits, missing, threshold, provenance, labels)
    write_text_atomic(sm.output.md, f"# Scale study ({config['scale']})\n\n" + text)
    scale_study.figure(summary, fits, sm.output.png, sm.output.pdf, threshold, provenance, labels)
    print(text)
