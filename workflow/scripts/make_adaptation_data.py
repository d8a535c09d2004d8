"""The adaptation set of data.adaptation (fastdllm_core.training.adaptation_data.build), counted with the
tokenizer of the init model (plan_data.adaptation_tokenizer); the manifest is written beside it."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from transformers import AutoTokenizer

    from fastdllm_core.training import adaptation_data

    cfg = adaptation_data.resolve(sm.params.spec)
    adaptation_data.source_dir(cfg)  # offline / missing copy: the named error, before the tokenizer loads
    tok = AutoTokenizer.from_pretrained(sm.params.tokenizer)
    m = adaptation_data.build(cfg, tok, sm.output.data)
    print(f"{m['rows']} rows, {m['tokens']} tokens ({', '.join(f'{k}: {v}' for k, v in m['subsets'].items())}) "
          f"-> {sm.output.data}; manifest {sm.output.manifest}")
