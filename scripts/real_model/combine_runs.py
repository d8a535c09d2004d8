"""Combine accuracy rows of runs over disjoint slices of one benchmark into one row per metric (n-weighted).

Used for the CPU real-model check (HumanEval run as problems 0-79 and 80-163 in two jobs):
    python scripts/real_model/combine_runs.py results/real_model/humaneval80_ar \
        results/real_model/humaneval81-164_ar --out results/real_model/humaneval164_ar/accuracy.csv
"""
import argparse
import csv
from pathlib import Path

from fastdllm_core.provenance import write_csv_atomic


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run directories holding accuracy.csv")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    rows = []
    for d in a.runs:
        with open(Path(d) / "accuracy.csv", newline="") as fh:
            rows += [dict(r, source_run=d) for r in csv.DictReader(fh)]
    out = []
    for metric in dict.fromkeys(r["metric"] for r in rows):
        part = [r for r in rows if r["metric"] == metric]
        ok = [r for r in part if r["status"] == "ok"]
        n = sum(int(r["n"]) for r in part)
        row = dict(part[0])
        row.update(n=n, source_run=";".join(r["source_run"] for r in part),
                   note="combined over disjoint slices: " + ", ".join(f"{r['source_run']} (n={r['n']})" for r in part))
        if len(ok) == len(part):
            row["value"] = round(sum(float(r["value"]) * int(r["n"]) for r in ok) / n, 2)
            for k in ("total_tokens", "wall_time_s", "nfe"):
                row[k] = sum(float(r[k]) for r in ok)
            row["tokens_per_s"] = round(row["total_tokens"] / row["wall_time_s"], 4)
            row["tokens_per_forward"] = ""  # not additive over runs with different batch compositions
        else:
            row.update(value="", status="n/a", note=part[0]["note"])
        out.append(row)
    write_csv_atomic(a.out, out)
    for r in out:
        print(r["task"], r["metric"], r["value"], f"n={r['n']}", r["status"])


if __name__ == "__main__":
    main()
