"""Training, the counterpart of :mod:`fastdllm_core.decoding`: adapt a causal LM to block diffusion (the paper's
recipe and its ablations), or NTP fine-tune it.

* :mod:`.config`: the typed :class:`~.config.TrainConfig` (a frozen dataclass per YAML section), the recipes, the
  key checks and the merge (no torch: the DAG imports it at parse time);
* :mod:`.row_reader`: a training row as read from a JSONL line, or the named reason it is not one (both readers);
* :mod:`.data`: training rows -> token ids and labels -> packed sequences;
* :mod:`.token_store`, :mod:`.store_key`: the run's packed data on disk and what it is made of (a resume on other
  data is refused);
* :mod:`.run_lock`: one run per output directory, unique temporaries; :mod:`.footprint`: anonymous and
  file-backed resident memory apart;
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
