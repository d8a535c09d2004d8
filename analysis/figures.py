"""Figures of the paper as pure functions of the results CSVs, with the paper's quoted points overlaid.

Absolute throughput of a tiny CPU model and of a 7B model on an A100 are not comparable, so every overlay of a
paper throughput value is drawn next to the like-for-like *ratio* (speed-up) measured here.

One module per group of figures: :mod:`.fig_speed` (Figures 1a, 1b, 5), :mod:`.fig_sweeps` (Figures 4, 6a, 6b),
:mod:`.fig_masks` (Figure 7); what they share is :mod:`.plotting`.  This module is their index.
"""
from __future__ import annotations

from .fig_masks import MASK_COLORS, fig_attention_masks
from .fig_speed import (
    NO_GPU_TEXT,
    batch_scaling,
    fig1a_throughput_vs_accuracy,
    fig1b_throughput_batch,
    fig_gpu_batch_throughput,
    speedup_pair,
)
from .fig_sweeps import fig_subblock_accuracy, fig_subblock_throughput, fig_threshold_gsm8k
from .plotting import PAPER_STYLE, _tps, _tps_range, plt, save

__all__ = ["MASK_COLORS", "NO_GPU_TEXT", "PAPER_STYLE", "_tps", "_tps_range", "batch_scaling",
           "fig1a_throughput_vs_accuracy", "fig1b_throughput_batch", "fig_attention_masks",
           "fig_gpu_batch_throughput", "fig_subblock_accuracy", "fig_subblock_throughput", "fig_threshold_gsm8k",
           "plt", "save", "speedup_pair"]
