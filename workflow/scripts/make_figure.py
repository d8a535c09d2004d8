"""Draw one figure (PNG + PDF) from the results CSVs."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from analysis.results_io import load_csvs, load_throughput
    from fastdllm_dag.job import report_specs

    inp = {k: [v] if isinstance(v, str) else list(v) for k, v in sm.input.items()}
    gpu = [load_throughput(p) for p in inp.get("gpu", [])]
    # acc: the evaluation-job CSVs of the models the figure shows; thr: its own throughput sweep's CSV
    # (workflow/fastdllm_dag/plan/report_inputs.py), each read as one frame
    report_specs.draw_figure(sm.params.name, sm.config, sm.output.png, sm.output.pdf,
                             acc=load_csvs(inp["acc"]) if "acc" in inp else None,
                             thr=load_throughput(inp["thr"]) if "thr" in inp else None, gpu_frames=gpu)
    print(f"wrote {sm.output.png} and {sm.output.pdf}")
