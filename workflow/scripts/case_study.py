"""The case-study prompts answered by the model under test with the block-diffusion decoder, through the model's
chat template: each conversation (single-turn: one user turn) is answered turn by turn, each later user turn
following the model's own earlier answers."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from analysis import paper_cases
    from fastdllm_core.decode_config import DecodeConfig
    from fastdllm_core.decoding import bd_generate
    from fastdllm_core.loading import load_model
    from fastdllm_core.provenance import run_metadata, write_csv_atomic
    from fastdllm_dag.job import common as jobs

    p, config = sm.params, sm.config
    device = jobs.require_device(config)
    lm = load_model(p.source, device=device, dtype=config.get("dtype", "auto"))
    decode = DecodeConfig.from_dict(dict(p.decode), max_new_tokens=int(p.max_new_tokens)).validate()
    convs = [list(turns) for turns in p.conversations]
    meta = run_metadata({"kind": sm.wildcards.kind, "conversations": convs, "decode": dict(p.decode)},
                        seed=config["seed"], device=device)
    rows = []
    for ci, turns in enumerate(convs):
        messages = []
        for ti, text in enumerate(turns):
            messages.append({"role": "user", "content": text})
            ids = lm.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            out = bd_generate(lm.model, [list(ids)], mask_token_id=lm.mask_token_id, stop_token_ids=lm.eos_token_ids,
                              config=decode)
            seq = [t for t in out.sequences[0] if t not in lm.eos_token_ids]
            answer = lm.tokenizer.decode(seq, skip_special_tokens=True).strip()
            messages.append({"role": "assistant", "content": answer})
            st = out.stats
            paper = paper_cases.match(sm.wildcards.kind, turns[: ti + 1])
            rows.append({"case": ci + 1, "turn": ti + 1, "prompt": text, "response": answer,
                         "prompt_source": (f"the paper's prompt, verbatim ({paper.table}, {paper.title})" if paper
                                           else "project stand-in prompt (not one of the paper's)"),
                         "model": p.model, "model_source": p.source, **p.decode,
                         "generated_tokens": st.total_tokens, "nfe": st.nfe, "wall_time_s": round(st.wall_time_s, 4),
                         "scale": config["scale"], **meta})
            print(f"[{ci}.{ti + 1}] {text!r} -> {answer!r} ({st.total_tokens} tokens, {st.nfe} forwards)")
    write_csv_atomic(sm.output[0], rows)
