"""What a ``generate`` call reports: :class:`GenerationStats` (tokens, forwards, times) and
:class:`GenerationOutput`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class GenerationStats:
    """Statistics of one ``generate`` call (tokens are counted up to and including EOS, never padding)."""

    mode: str
    batch_size: int
    generated_tokens: list[int]
    nfe: int  # forwards of the model (a batched forward counts once)
    # forwards each row took part in: a row waiting in the batch (its sub-block done, or past its EOS) is not
    # counted, so tokens per forward means the same at every batch size
    row_nfe: list[int]
    wall_time_s: float  # synchronised wall time of the whole call (model load excluded)
    row_latency_s: list[float]  # time from the call's start until the row was finished
    steps_per_block: list[int] = field(default_factory=list)  # decode steps (commit excluded) per block
    nfe_breakdown: dict = field(default_factory=dict)
    host_syncs: int = 0
    forward_time_s: float = 0.0  # time spent inside model forwards (synchronised; only when profile=True)
    capture_time_s: float = 0.0  # static decode path on CUDA: time spent capturing graphs in this call
    gen_length: int | None = None  # masked-diffusion samplers: the generation length worked on (no EOS stop)
    steps: int | None = None  # masked-diffusion samplers: the configured diffusion steps

    @property
    def total_tokens(self) -> int:
        return int(sum(self.generated_tokens))

    @property
    def tokens_per_forward(self) -> float:
        n = sum(self.row_nfe)
        return self.total_tokens / n if n else float("nan")

    @property
    def tokens_per_second(self) -> float:
        return self.total_tokens / self.wall_time_s if self.wall_time_s > 0 else float("nan")

    @classmethod
    def combine(cls, parts: list["GenerationStats"]) -> "GenerationStats":
        """The statistics of consecutive calls (e.g. the batches of a prompt set) as one: rows concatenated,
        forwards and wall times summed."""
        if len(parts) == 1:
            return parts[0]
        breakdown: dict = {}
        for s in parts:
            for k, v in s.nfe_breakdown.items():
                breakdown[k] = breakdown.get(k, 0) + v
        return cls(mode=parts[0].mode, batch_size=parts[0].batch_size,
                   generated_tokens=[t for s in parts for t in s.generated_tokens], nfe=sum(s.nfe for s in parts),
                   row_nfe=[n for s in parts for n in s.row_nfe], wall_time_s=sum(s.wall_time_s for s in parts),
                   row_latency_s=[x for s in parts for x in s.row_latency_s],
                   steps_per_block=[x for s in parts for x in s.steps_per_block], nfe_breakdown=breakdown,
                   host_syncs=sum(s.host_syncs for s in parts),
                   forward_time_s=sum(s.forward_time_s for s in parts),
                   capture_time_s=sum(s.capture_time_s for s in parts), gen_length=parts[0].gen_length,
                   steps=parts[0].steps)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(total_tokens=self.total_tokens, tokens_per_forward=self.tokens_per_forward,
                 tokens_per_second=self.tokens_per_second)
        return d


@dataclass
class GenerationOutput:
    sequences: list[list[int]]  # generated ids per row, up to and including the first stop id
    stats: GenerationStats
