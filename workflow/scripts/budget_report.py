"""The budget study's tidy CSVs, table and figure (analysis/budget_study.py: pure functions of the CSVs)."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan
    import plan_budget
    from analysis import budget_study
    from analysis.results_io import load_csv, load_csvs, measured_on
    from fastdllm_core.provenance import write_csv_atomic, write_text_atomic

    sm = snakemake  # noqa: F821
    config = sm.config
    acc, speed = load_csvs(list(sm.input.accuracy)), load_csvs(list(sm.input.speed))
    metrics, ar = load_csvs(list(sm.input.metrics)), load_csv(sm.input.ar)
    write_csv_atomic(sm.output.rows, acc.to_dict("records"))
    columns = plan_budget.report_columns(config)
    summary = budget_study.summarize(acc, speed, metrics, ar, columns, plan_budget.report_points(config))
    write_csv_atomic(sm.output.summary, summary.to_dict("records"))
    provenance = (f"Accuracy {measured_on(acc)}; speed {measured_on(speed)}. The study: "
                  f"{plan_budget.describe(config)}. Regenerate: `snakemake --cores all budget_study` with this "
                  "budget_study: config.")
    text = budget_study.markdown(summary, columns, float(config["speed_threshold"]), provenance)
    write_text_atomic(sm.output.md, f"# Budget study ({config['scale']})\n\n" + text)
    budget_study.figure(summary, sm.output.png, sm.output.pdf, config["budget_study"]["models"][0],
                        float(config["speed_threshold"]), provenance)
    print(text)
    print(f"AR base: {plan.role(config, 'speed_ar')}; wrote {sm.output.summary}, {sm.output.md}, {sm.output.png}")
