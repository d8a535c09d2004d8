"""One-off: the budget study's committed results as per-snapshot rows under results/budget_study/points/, the form
every study keeps (workflow/fastdllm_dag/plan/study.py), so that its report is remade from committed rows.

The study ran (2026-11-27) before its rows were kept per snapshot; what was committed is every accuracy row
(budget_study_rows.csv) and the summary (budget_study.csv).  This writes:

* ``<snapshot>.accuracy.csv``: that snapshot's accuracy rows, as run, with the columns a study's rows now carry
  (``base``, ``size``, ``size_params``, ``pretrain``, ``pretrain_tokens``: the default base, one size);
* ``<snapshot>.speed.csv`` and ``<snapshot>.metrics.csv``: one row each, recovered from the summary, marked in
  ``note``.  A group of one seed gives its value exactly; a group of three seeds gives its mean, minimum and
  maximum, hence its three values (the machine's fields are the snapshot's accuracy rows': the whole study ran
  on one machine) (the middle one is 3 x mean - min - max), but not which seed had which: they are
  written in seed order low, middle, high.  Final losses of a three-seed group are its mean, on every seed's row;
  passes over the set do not depend on the seed;
* ``base.default.accuracy.csv``: the AR base every snapshot starts from and is compared with, as scored by the
  scale study (results/scale_study/points/base.w128.accuracy.csv: the same released base on the same test items,
  whose values equal the budget summary's reference column for column; checked here).

Run once from the repository root: ``python scripts/maintenance/split_budget_rows.py``.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

OUT = Path("results/budget_study/points")
NOTE_SPEED = ("recovered from results/budget_study/budget_study.csv (mean, min and max over the group's seeds); "
              "the per-seed rows were not committed, so which seed had which value is not known")
NOTE_LOSS = "final loss: the mean over the group's seeds from results/budget_study/budget_study.csv (per-seed " \
            "rows were not committed)"


def pretrain_tokens(config: dict) -> int:
    o, seq = config["models"]["ar_pretrained"]["train"]["optim"], int(config["training"]["data"]["seq_len"])
    return int(o["max_steps"]) * int(o["batch_size"]) * seq


def key_of(row, model: str = "model_group") -> tuple:
    lever = "" if pd.isna(row["lever"]) else str(row["lever"])
    value = "" if pd.isna(row["lever_value"]) else float(row["lever_value"])
    return str(row[model]), lever, value, int(row["budget"])


def spread(mean: float, low: float, high: float, k: int) -> list[float]:
    if k == 1:
        return [mean]
    if k == 2:
        return [low, high]
    if k == 3:
        return [low, 3 * mean - low - high, high]
    raise ValueError(f"cannot recover {k} values from a mean, a minimum and a maximum")


def main() -> None:
    config = yaml.safe_load(open("config/config.yaml"))
    acc = pd.read_csv("results/budget_study/budget_study_rows.csv")
    summary = pd.read_csv("results/budget_study/budget_study.csv")
    seq, batch = int(config["training"]["data"]["seq_len"]), int(config["training"]["optim"]["batch_size"])
    ptok = pretrain_tokens(config)
    OUT.mkdir(parents=True, exist_ok=True)
    groups = {key_of(r, "model"): r for _, r in summary[summary["quantity"] == "speedup_b1"].iterrows()}
    members: dict[tuple, list[str]] = {}
    for snap, g in acc.groupby("snapshot", sort=False):
        members.setdefault(key_of(g.iloc[0]), []).append(snap)
    for key, snaps in members.items():
        s = groups[key]
        snaps = sorted(snaps, key=lambda n: int(acc[acc["snapshot"] == n]["train_seed"].iloc[0]))
        speeds = spread(float(s["value"]), float(s["ci_low"]), float(s["ci_high"]), len(snaps))
        for snap, speed in zip(snaps, speeds):
            g = acc[acc["snapshot"] == snap].copy()
            g["base"], g["size"], g["size_params"] = "default", "default", g["n_params"]
            g["pretrain"], g["pretrain_tokens"] = 1, ptok
            g.to_csv(OUT / f"{snap}.accuracy.csv", index=False)
            r = g.iloc[0]
            fields = {k: r[k] for k in ("snapshot", "chain", "base", "size", "size_params", "pretrain",
                                        "pretrain_tokens", "lever", "lever_value", "budget", "budget_tokens",
                                        "train_seed", "model_group")}
            device = {k: r[k] for k in ("device_type", "device_name", "cpu", "cpu_isa", "hostname")}  # one machine
            pd.DataFrame([dict(fields, **device, side="snapshot", speedup_vs_main_ar=speed, note=NOTE_SPEED)]).to_csv(
                OUT / f"{snap}.speed.csv", index=False)
            steps = round(int(r["budget_tokens"]) / (seq * batch))
            note = NOTE_LOSS if len(snaps) > 1 else "recovered from results/budget_study/budget_study.csv"
            pd.DataFrame([dict(fields, step=steps, passes=float(s["passes"]), loss=float(s["final_loss"]),
                               note=note)]).to_csv(OUT / f"{snap}.metrics.csv", index=False)
    base = pd.read_csv("results/scale_study/points/base.w128.accuracy.csv")
    ref = summary[summary["quantity"] == "accuracy"].drop_duplicates("column").set_index("column")["ref_value"]
    cols = config["columns"]
    for cid, v in ref.items():
        if cid == "avg":
            continue
        got = base[(base["task"] == cols[cid]["task"]) & (base["metric"] == cols[cid]["metric"])]["value"].iloc[0]
        if not math.isclose(float(got), float(v), abs_tol=1e-9):
            raise SystemExit(f"base.w128 {cid}: {got} != the budget summary's reference {v}")
    base = base.assign(snapshot="base.default", base="default", size="default", pretrain=1, pretrain_tokens=ptok,
                       note="scored by the scale study (results/scale_study/points/base.w128.accuracy.csv): the "
                            "same released base on the same test items")
    base.to_csv(OUT / "base.default.accuracy.csv", index=False)
    print(f"{len(list(OUT.glob('*.csv')))} files in {OUT}")


if __name__ == "__main__":
    main()
