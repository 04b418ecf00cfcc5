"""How much the model probe asks of a device at a time: the tokens of one forward pass, from the
memory free once the model is loaded and the model's shape, and the positions whose logits the
loss computes at once. Plain arithmetic apart from torch, so that each decision is tested with
the numbers a device would report.

Per token, a forward pass without a key/value cache holds about one layer's activations (the
residual stream, its normalized copy, queries, keys, values, attention output and projections:
ACTIVATION_HIDDEN hidden-sized vectors; the MLP's ACTIVATION_INTERMEDIATE intermediate-sized
ones), plus, when documents are packed, its row of the attention mask (a boolean and the additive
copy SDPA makes), plus, when the loss cannot be computed from the hidden states, its logits. The
loss then computes the float32 logits of a slice of positions at a time, never of the batch.
"""

from dataclasses import dataclass

ACTIVATION_HIDDEN = 16
ACTIVATION_INTERMEDIATE = 3
POSITION_BYTES = 64  # a position's input id, position id, target and owner, and their device copies
USABLE_SHARE = 0.85  # of the free memory: the rest for the allocator's fragmentation
RESERVE_BYTES = 1 << 30  # kernels' workspaces, compiled graphs
LOSS_SLICE_BYTES = 512 * 2**20  # the float32 logits (and their log-softmax) of one slice of positions
MIN_SLICE_POSITIONS = 16
# Past this a batch runs no faster (an H100 is saturated by 64 x 1,024 tokens of a GPT-2 small),
# and a pool of batches (causal_lm.POOL_BATCHES) waits longer to fill.
MAX_BATCH_TOKENS = 131_072
CPU_BATCH_TOKENS = 4096


class NotEnoughMemory(ValueError):
    """Not one document of max_tokens fits the device's free memory."""


@dataclass(frozen=True)
class ModelShape:
    """What decides a causal LM's activations per token."""

    hidden: int
    intermediate: int
    vocabulary: int

    @classmethod
    def of(cls, config) -> "ModelShape":
        """From a transformers config, whichever names its architecture uses (an MLP of four times
        the hidden size where it names none)."""
        hidden = _first(config, ("hidden_size", "n_embd", "d_model"))
        intermediate = _first(config, ("intermediate_size", "n_inner", "ffn_dim", "d_ff")) or 4 * hidden
        return cls(hidden, intermediate, config.vocab_size)


def _first(config, names: tuple[str, ...]) -> int | None:
    return next((value for name in names if isinstance(value := getattr(config, name, None), int)), None)


def token_bytes(shape: ModelShape, element_bytes: int, row_tokens: int, packed: bool, full_logits: bool) -> int:
    """Device bytes a token of a batch holds at the peak of a forward pass."""
    activations = element_bytes * (ACTIVATION_HIDDEN * shape.hidden + ACTIVATION_INTERMEDIATE * shape.intermediate)
    mask = row_tokens * (1 + element_bytes) if packed else 0
    logits = shape.vocabulary * element_bytes if full_logits else 0
    return activations + mask + logits + POSITION_BYTES


def loss_slice_positions(shape: ModelShape, element_bytes: int, budget_bytes: int) -> int:
    """Positions whose logits the loss computes at once: in the model's dtype, their float32 copy
    and its log-softmax, within `budget_bytes`."""
    return max(MIN_SLICE_POSITIONS, budget_bytes // (shape.vocabulary * (element_bytes + 8)))


def loss_slice_budget(free_bytes: int | None) -> int:
    """Bytes for one slice of the loss: LOSS_SLICE_BYTES, at most an eighth of a device's free
    memory (None: the CPU's, not counted)."""
    return LOSS_SLICE_BYTES if free_bytes is None else min(LOSS_SLICE_BYTES, free_bytes // 8)


def fitted_batch_tokens(
    free_bytes: int, shape: ModelShape, element_bytes: int, row_tokens: int, packed: bool, full_logits: bool
) -> int:
    """Tokens per forward pass on a device with `free_bytes` free once the model is loaded: what
    USABLE_SHARE of it holds after RESERVE_BYTES and a loss slice, at most MAX_BATCH_TOKENS. Fewer
    than one row of `row_tokens` (the longest document, with its prefix) is NotEnoughMemory."""
    slice_bytes = loss_slice_positions(shape, element_bytes, loss_slice_budget(free_bytes)) * shape.vocabulary * (
        element_bytes + 8)
    usable = int(free_bytes * USABLE_SHARE) - RESERVE_BYTES - slice_bytes
    per_token = token_bytes(shape, element_bytes, row_tokens, packed, full_logits)
    tokens = max(usable, 0) // per_token
    if tokens < row_tokens:
        needed = (row_tokens * per_token + RESERVE_BYTES + slice_bytes) / USABLE_SHARE
        raise NotEnoughMemory(
            f"the device has {free_bytes / 2**30:.2f} GiB free once the model is loaded; a batch of one "
            f"{row_tokens}-token document needs about {needed / 2**30:.2f} GiB. Lower the probe's max_tokens, "
            "or run it on a device with more free memory"
        )
    return min(tokens, MAX_BATCH_TOKENS)
