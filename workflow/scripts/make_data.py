"""Write the synthetic suite (thin wrapper of fastdllm_core.synthetic.write_suite)."""
import os

from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from fastdllm_core.synthetic import write_suite

    p = sm.params
    out = dict(sm.output.items())
    target = os.path.dirname(out["pretrain"])
    written = write_suite(target, seed=int(p.seed), n_eval=int(p.n_eval), n_pretrain=int(p.n_pretrain),
                          n_sft=int(p.n_sft), n_adapt=int(p.n_adapt))
    wrong = {k: (written.get(k), v) for k, v in out.items()
             if os.path.abspath(written.get(k, "")) != os.path.abspath(v)}
    if wrong:
        raise RuntimeError(f"write_suite wrote other paths than the rule declares: {wrong}")
    print({k: os.path.getsize(v) for k, v in out.items()})
