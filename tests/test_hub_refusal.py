"""A real refusal of a gated model, offline: the rehearsal's throughput batch sweep (Figures 1a/1b) and one
evaluation, run through Snakemake with one model of the sweep (llama3.2_1b, a Table 1 row and a Figure 1
baseline) pointed at its gated Hub id and the Hub replaced by tests/fake_hub.py.  No mock: transformers ->
huggingface_hub ask the fake Hub over HTTP and raise the real GatedRepoError from its 401 ``X-Error-Code:
GatedRepo``.  The DAG names the model and the fix: the sweep's rows of that model are n/a naming the repository
and HF_TOKEN while every other model is measured; its evaluation job fails saying the same."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from analysis.results_io import load_csv
from fake_hub import FakeHub
from test_rehearsal import ROOT, rehearsal_config

import plan_points  # noqa: E402 (workflow/lib, on the path through test_rehearsal)

GATED_MODEL, GATED_REPO = "llama3.2_1b", "meta-llama/Llama-3.2-1B-Instruct"


def _online_env(tmp_path: Path, hub_url: str) -> dict:
    """The environment of a user without a token whose machine reaches the Hub (here: the fake one); a fresh
    Hugging Face cache, so nothing is read from an earlier download."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_ENDPOINT=hub_url, HF_HOME=str(tmp_path / "hf_home"), HF_TOKEN_PATH=str(tmp_path / "no_token"),
               HF_DATASETS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_ETAG_TIMEOUT="5",
               HF_HUB_DOWNLOAD_TIMEOUT="5")
    return env


def test_gated_model_is_refused_through_the_real_client_and_the_sweep_goes_on(tmp_path):
    cfg = rehearsal_config()
    assert cfg["models"][GATED_MODEL]["source"] != GATED_REPO  # the rehearsal's stand-in, replaced below
    gated = tmp_path / "gated.yaml"
    gated.write_text(yaml.safe_dump({"models": {GATED_MODEL: {"source": GATED_REPO}}}))
    out = tmp_path / "out"
    R = out / "rehearsal"
    sweep, accuracy = R / "throughput" / "batch.csv", R / "accuracy" / f"{GATED_MODEL}.csv"
    t0 = time.monotonic()
    with FakeHub(GATED_REPO) as hub:
        r = subprocess.run(
            [sys.executable, "-m", "snakemake", str(sweep), str(accuracy), "-k", "--cores", "2", "--configfile",
             "config/paper.yaml", "config/rehearsal.yaml", str(gated), "--config", f"results_dir={out}"],
            cwd=ROOT, capture_output=True, text=True, timeout=600, env=_online_env(tmp_path, hub.url))
        asked = hub.asked_for_gated()
    print(f"gated-refusal run: {time.monotonic() - t0:.0f} s wall")
    log = r.stdout + r.stderr
    assert r.returncode != 0, log[-3000:]  # the evaluation of the gated model fails ...
    assert asked, hub.requests  # ... refused by the (fake) Hub, over HTTP, through the real client
    # the sweep: n/a rows of the gated model naming the repository and the fix; every other model measured
    rows = load_csv(sweep)
    na = rows[rows["model"] == GATED_MODEL]
    assert len(na) and set(na["status"]) == {"n/a"}, na
    assert all(GATED_REPO in n and "HF_TOKEN" in n and "gated" in n for n in na["note"]), list(na["note"])
    others = rows[rows["model"] != GATED_MODEL]
    want = {run["model"] for run in plan_points.bench_sweeps(cfg)["batch"]} - {GATED_MODEL}
    assert set(others["model"]) == want and set(others["status"]) == {"ok"}, others[["model", "status"]]
    assert (others["tokens_per_s"].astype(float) > 0).all()
    # the evaluation: the job fails (no accuracy CSV) and its log and Snakemake's stderr name the repo and the fix
    assert not accuracy.exists()
    assert set(re.findall(r"Error in rule (\w+):", log)) == {"evaluate"}, log[-3000:]
    eval_log = (R / "logs" / "accuracy" / f"{GATED_MODEL}.log").read_text()
    for text in (eval_log, r.stderr):
        refused = [line for line in text.splitlines() if "refused model" in line]
        assert any(GATED_REPO in x and "HF_TOKEN" in x for x in refused), text[-3000:]
    print("sweep note:", na["note"].iloc[0], "\nevaluate stderr:", refused[0], "\nHub asked:", asked)
