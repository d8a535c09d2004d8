"""Training, the counterpart of :mod:`fastdllm_core.decoding`: adapt a causal LM to block diffusion (the paper's
recipe and its ablations), or NTP fine-tune it.

* :mod:`.config`: the typed :class:`~.config.TrainConfig` (a frozen dataclass per YAML section), the recipes, the
  key checks and the merge (no torch: the DAG imports it at parse time);
* :mod:`.data`: training rows -> token ids and labels -> packed sequences;
* :mod:`.objective`: the block-diffusion, Dream-style and next-token losses;
* :mod:`.model_init`: the model a run starts from (tiny random Qwen2 or a checkpoint) and its [MASK] row;
* :mod:`.checkpoints`: resumable checkpoints, metrics read back on resume, the final checkpoint;
* :mod:`.loop`: :func:`~.loop.train`, the loop itself;
* :mod:`.parallel`: how several processes hold the model (``train.engine``: DDP or FSDP2), their checkpoints;
* :mod:`.memory`: :func:`~.memory.choose_engine` (``train.engine: auto``);
* :mod:`.launch`: the launch command (one process per GPU, across SLURM nodes: :func:`~.launch.launch_command`,
  :func:`~.launch.train_gpus`) and :func:`~.launch.train_processes`, CPU data-parallel processes through torchrun.

Nothing is imported here, so that ``fastdllm_core.training.config`` stays cheap.
"""
