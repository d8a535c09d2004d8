"""Which run a checkpoint belongs to, and whether a new launch may continue it.

Every checkpoint records the run's identity (``state.json``, key ``run``): the resolved training config less the
keys that cannot change the weights computed so far (:data:`IGNORED`), and the digest of the weights the run
started from (``model.init``: :func:`init_digest`).  The data's identity (content, tokenizer, packing) is
recorded beside it and checked by :func:`~.store_key.check_resume`.

* ``fastdllm train`` (and :func:`~.loop.train`) on a directory whose newest checkpoint carries another identity is
  refused before any data is read or any model loaded (:class:`ConfigChanged`, each differing key with its old and
  new value) unless asked (``--allow-config-change``).
* The DAG starts a changed run from step 0 (:func:`start_over_if_changed`): Snakemake reruns a training job because
  a setting of the model changed, and its run directory keeps checkpoints only so that an interrupted job of the
  *same* run resumes.

Left out of the identity (:data:`IGNORED`): where the run writes and how often (``train.save_every``,
``train.keep_checkpoints``, ``train.log_every``), how the same arithmetic is laid out on the machine
(``train.device``, ``train.engine`` -- checked on its own at resume --, ``train.attn_implementation``,
``train.gradient_checkpointing``, ``optim.micro_batch_size``: the loss of a step is the sum over its global batch
whatever its micro-batches), the paths of the training files and of ``model.init`` (their contents are in the
identity: the data's, and :func:`init_digest`), and
``optim.max_steps`` under a constant schedule, where the learning rate of every step taken does not depend on it:
extending a finished run continues it (the studies' chains do).  Under a linear or cosine schedule
``optim.max_steps`` shapes every step's rate and is part of the identity.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
from pathlib import Path

from .config import TrainConfig

log = logging.getLogger(__name__)
VERSION = 1
IGNORED = ("train.save_every", "train.keep_checkpoints", "train.log_every", "train.device", "train.engine",
           "train.attn_implementation", "train.gradient_checkpointing", "optim.micro_batch_size",
           "data.train_files", "model.init")  # the paths: their files' digests are in the identity
SCHEDULE_FREE = ("optim.max_steps",)  # ignored under a constant schedule only
# in the identity, but a change of them at resume is the data check's to name (store_key.SETTINGS: DataChanged)
DATA_KEYS = ("data.seq_len", "objective.block_size", "data.max_examples", "data.drop_after_answer", "train.seed")
NOT_WEIGHTS = ("fastdllm_train.json",)  # the run's metadata beside a trained model: times and hosts, no weights
ALLOW_HINT = "fastdllm train --allow-config-change, train(..., allow_config_change=True)"
_BLOB = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a Hugging Face cache blob: named by its content's hash


class ConfigChanged(ValueError):
    """A resume whose training config or start weights are not those its checkpoint was trained under."""


def flat(d: dict, prefix: str = "") -> dict:
    """``{"optim": {"lr": 1}}`` as ``{"optim.lr": 1}``; ``model.tiny`` (free-form) stays one value."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and key != "model.tiny":
            out.update(flat(v, key + "."))
        else:
            out[key] = v
    return out


def config_identity(cfg: TrainConfig) -> dict:
    """The dotted keys of the resolved config that shape the weights (see the module docstring)."""
    keys = flat(json.loads(json.dumps(cfg.to_dict())))
    ignored = set(IGNORED) | (set(SCHEDULE_FREE) if cfg.optim.schedule == "constant" else set())
    return {k: v for k, v in keys.items() if k not in ignored}


def _file_digest(path: Path, chunk: int = 2**22) -> str:
    target = path.resolve()
    if path.is_symlink() and target.parent.name == "blobs" and _BLOB.fullmatch(target.name):
        return target.name  # the Hugging Face cache names a blob by its content's sha256 (git sha1 if small)
    h = hashlib.sha256()
    with open(target, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def init_digest(init: str) -> str | None:
    """sha256 over the files the run starts from (weights, config, tokenizer; not :data:`NOT_WEIGHTS`), in name
    order: a local directory or file as it is, a Hub id through its snapshot (fetched once, as the launch does);
    None for ``tiny`` (its weights are a function of the config and the seed)."""
    if init == "tiny":
        return None
    root = Path(init)
    if not root.exists():
        root = Path(prefetch_init(init))
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and p.name not in NOT_WEIGHTS and not p.name.startswith("."))
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(root) if p != root else p.name}\0{_file_digest(p)}\n".encode())
    return h.hexdigest()


def prefetch_init(init: str, download=None) -> str | None:
    """Download the start model's files once, in the launching process, before any rank starts (a Hub id; a local
    directory or ``tiny`` needs nothing): the ranks then read the Hugging Face cache, which must be on a file
    system every node sees (``HF_HOME``), instead of 64 processes asking the Hub at once.  Returns the snapshot
    directory, or None when there is nothing to fetch."""
    if init == "tiny" or Path(init).exists():
        return None
    if download is None:
        from huggingface_hub import snapshot_download as download
    from ..hub_access import hub_guard

    with hub_guard(init):
        return download(init, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.py"])


def run_identity(cfg: TrainConfig) -> dict:
    """What every checkpoint of the run records (``state.json``'s ``run``)."""
    return {"version": VERSION, "config": config_identity(cfg), "init_sha256": init_digest(cfg.model.init)}


def changes(old: dict, new: dict, skip=()) -> list[str]:
    """What differs between two run identities, one phrase a key (old value -> new value); ``skip``: keys left
    to another check."""
    out = []
    a, b = old.get("config", {}), new.get("config", {})
    for k in sorted((set(a) | set(b)) - set(skip)):
        if a.get(k, "(unset)") != b.get(k, "(unset)"):
            out.append(f"{k} ({a.get(k, '(unset)')!r} -> {b.get(k, '(unset)')!r})")
    if old.get("init_sha256") != new.get("init_sha256"):
        out.append(f"the weights of model.init (sha256 {str(old.get('init_sha256'))[:12]}... -> "
                   f"{str(new.get('init_sha256'))[:12]}...)")
    return out


def recorded_identity(checkpoint: Path) -> dict | None:
    """The run identity a checkpoint records (None: written before checkpoints recorded one)."""
    return json.loads((Path(checkpoint) / "state.json").read_text()).get("run")


def check_same_run(run_dir, new: dict, allow: bool = False) -> None:
    """Refuse (:class:`ConfigChanged`) to continue the newest checkpoint of ``run_dir`` under another identity
    than ``new``; with ``allow``, a warning.  The keys the data's identity holds (:data:`DATA_KEYS`) are left to
    :func:`~.store_key.check_resume`, which names them as a change of the data."""
    from .checkpoints import checkpoints

    cks = checkpoints(Path(run_dir))
    if not cks:
        return
    old = recorded_identity(cks[-1])
    diff = (["it records no run identity (written by an earlier version)"] if old is None
            else changes(old, new, skip=DATA_KEYS))
    if not diff:
        return
    what = "; ".join(diff)
    if allow:
        log.warning("continuing %s under a changed run (%s), as asked", cks[-1], what)
        return
    raise ConfigChanged(f"{run_dir}: checkpoint {cks[-1].name} was trained under another run: {what}. Refusing to "
                        f"continue its steps under this config: train in a new output directory, remove "
                        f"{Path(run_dir) / 'checkpoints'} to start over, or continue anyway ({ALLOW_HINT})")


def start_over_if_changed(run_dir, cfg: TrainConfig) -> list[str]:
    """The DAG's policy: remove what ``run_dir`` holds of another run -- its checkpoints, metrics, divergence
    record -- when its newest checkpoint's identity (run and data content) is not ``cfg``'s, and the checkpoints
    past ``optim.max_steps``; returns what changed (empty: the run resumes, if it has a checkpoint)."""
    from .checkpoints import checkpoint_step, checkpoints
    from .store_key import data_digest

    run_dir = Path(run_dir)
    for ck in checkpoints(run_dir):
        if checkpoint_step(ck) > cfg.optim.max_steps:
            log.info("removing %s: past optim.max_steps=%d", ck, cfg.optim.max_steps)
            shutil.rmtree(ck)
    cks = checkpoints(run_dir)
    if not cks:
        return []
    state = json.loads((cks[-1] / "state.json").read_text())
    old = state.get("run")
    why = ["it records no run identity"] if old is None else changes(old, run_identity(cfg))
    data = (state.get("data") or {}).get("data_sha256")
    if data != data_digest(cfg.data.train_files):
        why.append("the content of data.train_files")
    if why:
        shutil.rmtree(run_dir / "checkpoints")
        for name in ("metrics.csv", "diverged.json"):
            (run_dir / name).unlink(missing_ok=True)
        log.warning("%s: another run than its checkpoint %s (%s): training from step 0", run_dir, cks[-1].name,
                    "; ".join(why))
    return why
