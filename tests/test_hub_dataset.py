"""The bench prompts' Hub branch, offline but through the real client: with no local GSM8K file (no
``data.eval_paths.gsm8k``, no ``$FASTDLLM_GSM8K_PATH``, an empty shared directory) and the Hub online, the
throughput sweep's prompts load from ``openai/gsm8k`` (configuration ``main``, split ``test``, field
``question``: lm-eval's own gsm8k task) through ``datasets`` -> ``huggingface_hub`` -> HTTP, here answered by
tests/fake_hub.py serving a stand-in of that repository in the real layout (a card naming the configuration's data
files, ``main/{train,test}-00000-of-00001.parquet``).  No mock: the test asserts the server was asked for the
repository and the prompts are the stand-in's questions, in order.  (a) the library call in a fresh process; (b)
the rehearsal's ``threshold`` sweep through Snakemake; (c) the evaluation's own Hub branch (lm-eval's official
gsm8k task, no ``data_path``) on 4 items."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from analysis.results_io import load_csv
from conftest import smk
from fake_hub import COMMIT, FakeHub, gsm8k_files
from fastdllm_dag.plan import points as plan_points
from test_rehearsal import ROOT, rehearsal_config

REPO = "openai/gsm8k"
TEST_ROWS = [{"question": f"Stand-in question {i}: Ann has {i + 2} pens and buys {i} more. How many pens?",
              "answer": f"She has {i + 2} + {i} = {2 * i + 2} pens.\n#### {2 * i + 2}"} for i in range(8)]
TRAIN_ROWS = [{"question": "Stand-in train question: 1 + 1?", "answer": "1 + 1 = 2\n#### 2"}]
WHERE = f"hub {REPO}/main:test"  # the label fastdllm_core.bench.prompt_source gives prompts from the Hub


def _online_env(tmp_path: Path, hub_url: str) -> dict:
    """A user's machine that reaches the Hub (here: the fake one) and has no local GSM8K: the offline switches
    and the GSM8K override unset, an empty shared directory, fresh Hugging Face caches."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "FASTDLLM_OFFLINE",
                        "FASTDLLM_GSM8K_PATH", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    (tmp_path / "empty_shared").mkdir(exist_ok=True)
    env.update(HF_ENDPOINT=hub_url, HF_HOME=str(tmp_path / "hf_home"),
               HF_DATASETS_CACHE=str(tmp_path / "hf_datasets"), HF_TOKEN_PATH=str(tmp_path / "no_token"),
               FASTDLLM_SHARED_DIR=str(tmp_path / "empty_shared"), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_ETAG_TIMEOUT="5", HF_HUB_DOWNLOAD_TIMEOUT="5", PYTHONPATH=str(ROOT))
    return env


def _hub() -> FakeHub:
    return FakeHub(datasets={REPO: gsm8k_files(TEST_ROWS, TRAIN_ROWS)})


def test_bench_prompts_load_from_the_hub_through_the_real_client(tmp_path):
    code = ("import json; from fastdllm_core.bench import load_prompt_texts; "
            "texts, where = load_prompt_texts('gsm8k', None); print(json.dumps({'texts': texts, 'where': where}))")
    with _hub() as hub:
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env=_online_env(tmp_path, hub.url))
        asked = hub.asked_for(REPO)
    assert r.returncode == 0, (r.stderr[-3000:], hub.requests)
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["where"] == WHERE
    assert got["texts"] == [row["question"] for row in TEST_ROWS]  # the test split's questions, in order
    # the client resolved ``main`` to the repository's commit and downloaded the test split's file at it
    assert ("GET", f"/datasets/{REPO}/resolve/{COMMIT}/main/test-00000-of-00001.parquet") in asked, asked


def test_rehearsal_bench_sweep_takes_its_prompts_from_the_hub(tmp_path):
    """The rehearsal's ``threshold`` sweep (one stand-in model) with its GSM8K prompt file unset and an empty
    ``shared_dir``: the bench job loads the prompts from the (fake) Hub and measures every run; its log says where
    the prompts came from (the rows' ``prompt_set`` says only ``gsm8k[:n]``)."""
    cfg = rehearsal_config()
    sweep_name = "threshold"
    assert cfg["bench"]["prompts_from"] == "gsm8k" and cfg["data"]["eval_paths"].get("gsm8k")  # unset below
    no_local = tmp_path / "no_local_gsm8k.yaml"
    no_local.write_text(yaml.safe_dump({"data": {"eval_paths": {"gsm8k": ""}}}))
    out = tmp_path / "out"
    R = out / "rehearsal"
    sweep = R / "throughput" / f"{sweep_name}.csv"
    t0 = time.monotonic()
    with _hub() as hub:
        r = smk(str(sweep), "--cores", "2", "--configfile", "config/paper.yaml", "config/rehearsal.yaml",
                str(no_local), "--config", f"results_dir={out}",
                f"shared_dir={tmp_path / 'empty_shared'}",  # the workflow sets $FASTDLLM_SHARED_DIR from it
                timeout=600, env=_online_env(tmp_path, hub.url))
        asked = hub.asked_for(REPO)
    print(f"hub-prompts sweep run: {time.monotonic() - t0:.0f} s wall")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert asked, hub.requests
    rows = load_csv(sweep)
    runs = plan_points.bench_sweeps(cfg)[sweep_name]
    assert len(rows) == len(runs) and set(rows["status"]) == {"ok"}, rows[["model", "status"]]
    assert (rows["tokens_per_s"].astype(float) > 0).all()
    n = int(cfg["bench"]["num_prompts"])
    assert set(rows["prompt_set"]) == {f"gsm8k[:{n}]"} and set(rows["prompts_source"]) == {WHERE}
    log = (R / "logs" / "throughput" / f"{sweep_name}.log").read_text()
    assert f"{n} prompts from {WHERE}" in log, log[-3000:]


def test_gsm8k_evaluation_loads_lm_evals_official_task_from_the_hub(tmp_path):
    """The evaluation's Hub branch: ``run_task`` on GSM8K with no ``data_path`` runs lm-eval's own gsm8k task, whose
    ``datasets`` load asks the (fake) Hub; 4 items of the stand-in test split, in order, on a tiny checkpoint."""
    code = ("import sys; from fastdllm_core.tiny import write_tiny_checkpoint; "
            "from fastdllm_core.evaluation import run_task; "
            "ck = write_tiny_checkpoint(sys.argv[1] + '/model', fast_dllm_format=True); "
            "run_task(str(ck), 'gsm8k', mode='bd', limit=4, batch_size=4, out_dir=sys.argv[1] + '/eval', "
            "max_new_tokens=8)")
    with _hub() as hub:
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                           timeout=300, env=_online_env(tmp_path, hub.url))
        asked = hub.asked_for(REPO)
    assert r.returncode == 0, (r.stderr[-3000:], hub.requests)
    assert ("GET", f"/datasets/{REPO}/resolve/{COMMIT}/main/test-00000-of-00001.parquet") in asked, asked
    rows = load_csv(tmp_path / "eval" / "accuracy.csv")
    assert set(rows["data_source"]) == {"hub openai/gsm8k"} and set(rows["n"].astype(int)) == {4}, rows
    samples = [json.loads(line) for line in (tmp_path / "eval" / "samples.jsonl").read_text().splitlines()]
    assert [s["target"] for s in samples] == [row["answer"] for row in TEST_ROWS[:4]]
    assert all(row["question"] in s["prompt"] for s, row in zip(samples, TEST_ROWS))
