"""Write the synthetic suite (thin wrapper of fastdllm_core.evaluation.synthetic.write_suite)."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    from fastdllm_core.evaluation.synthetic import write_suite

    p = snakemake.params  # noqa: F821
    out = {k: v for k, v in snakemake.output.items()}  # noqa: F821
    target = os.path.dirname(out["arith_train"])
    written = write_suite(target, seed=int(p.seed), n_train=int(p.n_train), n_eval=int(p.n_eval))
    for key, path in out.items():
        if os.path.abspath(written[key]) != os.path.abspath(path):
            shutil.copyfile(written[key], path)
    print({k: os.path.getsize(v) for k, v in out.items()})
