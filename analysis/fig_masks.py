"""Figure 7: the block-diffusion attention masks, drawn from :mod:`fastdllm_core.masks` (the functions the model
uses), so the figure cannot drift from the code."""
from __future__ import annotations

from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from .plotting import plt, save

# The paper's Figure 7 colours (its LaTeX: myblue, mygreen, myorange)
MASK_COLORS = {"bd": "#47B1E1", "obc": "#46D45A", "bc": "#F3AA84", "cache": "#c8c8c8"}


def _block_grid(ax, n_rows, n_cols, D):
    """Faint lines between tokens, darker ones between blocks of D tokens."""
    for c in range(n_cols + 1):
        ax.axvline(c - 0.5, color="#888888" if c % D == 0 else "#dddddd", lw=0.6 if c % D == 0 else 0.3)
    for r in range(n_rows + 1):
        ax.axhline(r - 0.5, color="#888888" if r % D == 0 else "#dddddd", lw=0.6 if r % D == 0 else 0.3)


def mask_parts(L: int, D: int):
    """(training mask over ``[x_t | x_0]`` labelled 0 none / 1 M_BD / 2 M_OBC / 3 M_BC, inference mask of the last
    block against a cache of L - D tokens labelled 0 none / 1 cached prefix / 2 the block, cache length)."""
    import torch

    from fastdllm_core.masks import dense_mask, inference_mask_mod, training_mask_mod

    n = 2 * L
    q = torch.arange(n)[:, None]
    kv = torch.arange(n)[None, :]
    full = dense_mask(training_mask_mod(L, D), n, n)
    part = torch.zeros(n, n, dtype=torch.long)
    part[full & (q < L) & (kv < L)] = 1  # M_BD
    part[full & (q < L) & (kv >= L)] = 2  # M_OBC
    part[full & (q >= L) & (kv >= L)] = 3  # M_BC
    C = L - D  # decoding the last block of an L-token sequence: L - D tokens are in the cache
    infer = dense_mask(inference_mask_mod(D, cache_len=C), D, C + D)
    cat = torch.zeros(D, C + D, dtype=torch.long)
    cat[infer & (kv[:, : C + D] < C)] = 1  # cached prefix
    cat[infer & (kv[:, : C + D] >= C)] = 2  # the current block, bidirectional
    return part, cat, C


def _draw_training(ax, part, L: int, D: int) -> None:
    n = 2 * L
    cmap = ListedColormap(["white", MASK_COLORS["bd"], MASK_COLORS["obc"], MASK_COLORS["bc"]])
    ax.imshow(part.numpy(), cmap=cmap, vmin=0, vmax=3, interpolation="nearest")
    _block_grid(ax, n, n, D)
    ax.axhline(L - 0.5, color="k", lw=1.5)
    ax.axvline(L - 0.5, color="k", lw=1.5)
    ax.set_xticks([(L - 1) / 2, L + (L - 1) / 2])
    ax.set_xticklabels(["$x_t$ (noised)", "$x_0$ (clean)"])
    ax.set_yticks([(L - 1) / 2, L + (L - 1) / 2])
    ax.set_yticklabels(["$x_t$", "$x_0$"])
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.set_ylabel("query")
    ax.set_title(f"(a) training mask over $[x_t | x_0]$ (L={L} tokens, block D={D})", pad=24, fontsize=10)
    ax.legend(handles=[
        Patch(color=MASK_COLORS["bd"], label="Block Diagonal ($M_{BD}$): $x_t$ within its block"),
        Patch(color=MASK_COLORS["obc"], label="Offset Block Causal ($M_{OBC}$): $x_t$ to earlier clean blocks"),
        Patch(color=MASK_COLORS["bc"], label="Block Causal ($M_{BC}$): $x_0$ to its own and earlier blocks"),
        Patch(facecolor="white", edgecolor="#888888", label="not attended")],
        loc="upper center", bbox_to_anchor=(0.5, -0.03), fontsize=8, frameon=False)


def _draw_inference(bx, cat, C: int, D: int) -> None:
    cmap_i = ListedColormap(["white", MASK_COLORS["cache"], MASK_COLORS["bd"]])
    bx.imshow(cat.numpy(), cmap=cmap_i, vmin=0, vmax=2, interpolation="nearest")
    for x0 in range(0, C, D):  # shade the cached blocks
        bx.add_patch(plt.Rectangle((x0 - 0.5, -0.5), D, D, fill=False, hatch="///", edgecolor="#888888", lw=0))
    _block_grid(bx, D, C + D, D)
    bx.axvline(C - 0.5, color="k", lw=1.5)
    bx.set_xticks([(C - 1) / 2, C + (D - 1) / 2])
    bx.set_xticklabels([f"cached prefix: {C // D} earlier block(s)\n(clean $x_0$, KV cache)",
                        "current block\n(noised $x_t$)"], fontsize=8)
    bx.set_yticks([(D - 1) / 2])
    bx.set_yticklabels(["current\nblock"], fontsize=8)
    bx.xaxis.tick_top()
    bx.tick_params(length=0)
    bx.set_ylabel("query")
    bx.set_title("(b) inference: only the current noised block is computed", pad=34, fontsize=10)
    bx.legend(handles=[
        Patch(facecolor=MASK_COLORS["cache"], hatch="///", edgecolor="#888888",
              label="cached prefix (shaded): attended, read from the KV cache"),
        Patch(color=MASK_COLORS["bd"], label="current block: bidirectional within itself")],
        loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=8, frameon=False)


def fig_attention_masks(png, pdf, seq_len: int = 8, block_size: int = 2):
    """Figure 7, drawn from :mod:`fastdllm_core.masks` (the functions the model uses).

    (a) the training mask over ``[x_t | x_0]`` coloured by its three parts, as in the paper: block diagonal
    (M_BD), offset block causal (M_OBC), block causal (M_BC).  (b) inference: the current noised block's queries
    against the keys they see: the cached clean prefix (shaded: earlier blocks, read from the KV cache and not
    recomputed) and, bidirectionally, the block itself (``inference_mask_mod`` with a cache of L - D tokens)."""
    L, D = int(seq_len), int(block_size)
    part, cat, C = mask_parts(L, D)
    fig = plt.figure(figsize=(13, 6.2))
    gs = fig.add_gridspec(2, 2, width_ratios=[1, 1.25], height_ratios=[1, 0.001], wspace=0.25)
    _draw_training(fig.add_subplot(gs[0, 0]), part, L, D)
    _draw_inference(fig.add_subplot(gs[0, 1]), cat, C, D)
    fig.suptitle("Figure 7: block-diffusion attention masks (from fastdllm_core.masks)", fontsize=11)
    save(fig, png, pdf)
