"""The budget study's tidy CSVs, table and figure (analysis/budget_study.py: pure functions of the CSVs)."""
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan
    import plan_points
    from analysis import budget_study
    from analysis.results_io import load_csv, load_csvs, measured_on
    from fastdllm_core.provenance import write_csv_atomic, write_text_atomic

    sm = snakemake  # noqa: F821
    config = sm.config
    acc, speed = load_csvs(list(sm.input.accuracy)), load_csvs(list(sm.input.speed))
    metrics, ar = load_csvs(list(sm.input.metrics)), load_csv(sm.input.ar)
    write_csv_atomic(sm.output.rows, acc.to_dict("records"))
    study = config["budget_study"]
    columns = {c: config["columns"][c] for c in study.get("columns") or config["tables"]["table2"]["columns"]
               if "task" in config["columns"][c]}
    points = {"accuracy": plan_points.point_name("bd", plan_points.base_decode(config)),
              "speed": plan_points.point_name("bd", plan_points.speed_decode(config))}
    summary = budget_study.summarize(acc, speed, metrics, ar, columns, points)
    write_csv_atomic(sm.output.summary, summary.to_dict("records"))
    provenance = (f"Accuracy {measured_on(acc)}; speed {measured_on(speed)}. "
                  f"Regenerate: `snakemake --cores all budget_study` (config budget_study:).")
    text = budget_study.markdown(summary, columns, float(config["speed_threshold"]), provenance)
    write_text_atomic(sm.output.md, f"# Budget study ({config['scale']})\n\n" + text)
    budget_study.figure(summary, sm.output.png, sm.output.pdf, study["models"][0], float(config["speed_threshold"]),
                        provenance)
    print(text)
    print(f"AR base: {plan.role(config, 'speed_ar')}; wrote {sm.output.summary}, {sm.output.md}, {sm.output.png}")
