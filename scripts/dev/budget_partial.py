"""The budget study's table and figure over the snapshots measured so far (a study stopped part-way: rule
budget_report needs every snapshot).  The same pure functions as the rule (analysis/budget_study.py) over the
snapshots' CSVs that exist, written under ``OUT`` with the list of what is missing, so that a partial table is never
mistaken for the study's:

    python scripts/dev/budget_partial.py [--results results] [--out results/budget_study/partial]

Every number is a DAG job's (rules budget_train, budget_point, budget_speed); a snapshot not yet scored is left out
(its training rows alone say nothing), one scored but not yet timed reads n/a for speed."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "workflow" / "lib"))

import plan_budget  # noqa: E402
import plan  # noqa: E402

from analysis import budget_study as analysis  # noqa: E402
from analysis.results_io import load_csv, load_csvs, measured_on  # noqa: E402
from fastdllm_core.provenance import write_csv_atomic, write_text_atomic  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=Path, default=ROOT / "results")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "budget_study" / "partial")
    args = p.parse_args(argv)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["models"] = plan.expand_seeds(config)["models"]
    run = args.results / config["scale"] / "budget_study"
    snaps = plan_budget.snapshots(config)
    done = [s for s in snaps if all((run / f).is_file() for f in (f"points/{s}.accuracy.csv", f"metrics/{s}.csv"))]
    timed = [s for s in done if (run / f"points/{s}.speed.csv").is_file()]
    missing = [s for s in snaps if s not in done]
    if not timed:
        raise SystemExit(f"no snapshot of the budget study has been scored and timed under {run}")
    acc = load_csvs([run / f"points/{s}.accuracy.csv" for s in done])
    speed = load_csvs([run / f"points/{s}.speed.csv" for s in timed])
    metrics = load_csvs([run / f"metrics/{s}.csv" for s in done])
    ar = load_csv(args.results / config["scale"] / "accuracy" / f"{plan.role(config, 'speed_ar')}.csv")
    columns = plan_budget.report_columns(config)
    summary = analysis.summarize(acc, speed, metrics, ar, columns, plan_budget.report_points(config))
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(args.out / "budget_study.csv", summary.to_dict("records"))
    for name, frame in (("accuracy", acc), ("speed", speed), ("metrics", metrics)):
        write_csv_atomic(args.out / f"snapshots_{name}.csv", frame.to_dict("records"))
    untimed = [s for s in done if s not in timed]
    head = (f"PARTIAL: {len(done)} of {len(snaps)} snapshots of the budget study ({', '.join(done)}); not yet "
            f"measured: {', '.join(missing) or 'none'}; scored but not yet timed (speed n/a): "
            f"{', '.join(untimed) or 'none'}. Made by scripts/dev/budget_partial.py from the DAG's "
            "snapshot CSVs; `snakemake --cores all budget_study` goes on from where the study stopped.")
    provenance = f"{head} Accuracy {measured_on(acc)}; speed {measured_on(speed)}."
    text = analysis.markdown(summary, columns, float(config["speed_threshold"]), provenance)
    write_text_atomic(args.out / "budget_study.md", f"# Budget study, partial ({config['scale']})\n\n{head}\n\n{text}")
    analysis.figure(summary, args.out / "budget_study.png", args.out / "budget_study.pdf",
                    config["budget_study"]["models"][0], float(config["speed_threshold"]), provenance)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
