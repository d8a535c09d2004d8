"""Dev analysis (not part of the DAG, not a test): each row of a throughput sweep against the AR reference round by
round.  A sweep measured in interleaved rounds (``bench.rounds``) keeps each row's fastest round, and its
``speedup_vs_main_ar`` divides two fastest rounds that may come from different rounds; one lucky round of either
side sets the ratio.  Dividing within each round (both sides measured minutes apart, in the same pass over the
models) gives one ratio per round; their median and range say how steady the ratio is.

    python scripts/dev/round_ratios.py results/tiny/throughput/batch.csv [--reference ar_base] [--out ratios.csv]

Pairs every measured row with the reference model's AR row at the same batch size; prints (and writes with
``--out``) model, mode, batch, the CSV's kept-round ratio, every round's ratio, their median, min and max.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def rounds_of(row: dict) -> list[float]:
    """A row's tokens/s in every round (``tokens_per_s_rounds``), or a clear error naming the row."""
    got = row.get("tokens_per_s_rounds", "")
    if not got:
        raise SystemExit(f"row {row['model']} {row['mode']} batch {row['batch_size']}: no tokens_per_s_rounds (a sweep "
                         "measured before bench.rounds, or not in rounds)")
    return [float(x) for x in got.split(";")]


def round_ratios(rows: list[dict], reference: str) -> list[dict]:
    """One dict per measured row: its per-round ratios to the reference's AR row at the same batch size."""
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    ref = {r["batch_size"]: rounds_of(r) for r in ok if r["model"] == reference and r["mode"] == "ar"}
    if not ref:
        models = sorted({r["model"] for r in ok})
        raise SystemExit(f"--reference {reference!r} has no measured AR row here (models: {models})")
    out = []
    for r in ok:
        base = ref.get(r["batch_size"])
        if base is None:
            continue
        mine = rounds_of(r)
        if len(mine) != len(base):
            raise SystemExit(f"row {r['model']} {r['mode']} batch {r['batch_size']}: {len(mine)} rounds, the reference "
                             f"{len(base)}")
        ratios = [a / b for a, b in zip(mine, base)]
        out.append(dict(model=r["model"], mode=r["mode"], batch_size=r["batch_size"],
                        kept_round_ratio=r.get("speedup_vs_main_ar", ""),
                        round_ratios=";".join(f"{x:.3f}" for x in ratios), median=round(statistics.median(ratios), 3),
                        min=round(min(ratios), 3), max=round(max(ratios), 3)))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", type=Path, help="a throughput sweep's CSV (e.g. results/tiny/throughput/batch.csv)")
    ap.add_argument("--reference", default="ar_base", help="the AR reference model (config roles.main_ar)")
    ap.add_argument("--out", type=Path, default=None, help="CSV of the ratios")
    args = ap.parse_args(argv)
    if not args.csv.is_file():
        raise SystemExit(f"{args.csv}: no such file")
    with args.csv.open(newline="") as f:
        got = round_ratios(list(csv.DictReader(f)), args.reference)
    for g in got:
        kept = float(g["kept_round_ratio"] or "nan")
        print(f"{g['model']:>12} {g['mode']:>5} b{g['batch_size']:<3} kept {kept:.2f}x  per round {g['round_ratios']}  "
              f"median {g['median']:.2f}x  range {g['min']:.2f}-{g['max']:.2f}x")
    if args.out:
        from fastdllm_core.provenance import write_csv_atomic

        write_csv_atomic(args.out, got)


if __name__ == "__main__":
    main()
