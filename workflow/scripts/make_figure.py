"""Draw one figure (PNG + PDF) from the results CSVs."""
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import report_specs
    from analysis.results_io import load_csv, load_throughput

    sm = snakemake  # noqa: F821
    inp = dict(sm.input.items())
    gpu = [load_throughput(p) for p in (inp.get("gpu") or [])] if "gpu" in inp else []
    report_specs.draw_figure(sm.params.name, sm.config, sm.output.png, sm.output.pdf,
                             acc=load_csv(inp["acc"]) if "acc" in inp else None,
                             thr=load_throughput(inp["thr"]) if "thr" in inp else None, gpu_frames=gpu)
    print(f"wrote {sm.output.png} and {sm.output.pdf}")
