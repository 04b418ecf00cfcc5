"""How much the model probe asks of a device, from the numbers a device reports: the batch follows
the free memory and the model, fits what it is given, and is refused, naming both sizes, when not
one document fits."""

from types import SimpleNamespace

import pytest

from fw_assets.probe.device_memory import (
    LOSS_SLICE_BYTES,
    MAX_BATCH_TOKENS,
    RESERVE_BYTES,
    USABLE_SHARE,
    ModelShape,
    NotEnoughMemory,
    fitted_batch_tokens,
    loss_slice_budget,
    loss_slice_positions,
    token_bytes,
)

GIB = 2**30
GPT2_SMALL = ModelShape.of(SimpleNamespace(n_embd=768, n_inner=None, vocab_size=32_000))
LLAMA_1B = ModelShape.of(SimpleNamespace(hidden_size=2048, intermediate_size=5632, vocab_size=32_000))
ROW = 1025  # 1,024 tokens and the prefix


def test_a_models_shape_is_read_whatever_its_config_calls_it():
    assert GPT2_SMALL == ModelShape(768, 3072, 32_000), "GPT-2 names no MLP size: four times the hidden size"
    assert LLAMA_1B == ModelShape(2048, 5632, 32_000)


def test_the_batch_grows_with_the_free_memory_until_the_cap():
    sizes = [fitted_batch_tokens(free * GIB, GPT2_SMALL, 2, ROW, packed=True, full_logits=False)
             for free in (2, 4, 8, 80)]
    assert sizes[0] < sizes[1] < sizes[2] <= sizes[3] == MAX_BATCH_TOKENS
    assert sizes[1] > 2 * sizes[0], "the reserve is fixed: twice the memory, more than twice the tokens"


@pytest.mark.parametrize("free_gib", [2, 3, 6])
def test_the_batch_and_a_loss_slice_fit_the_share_of_the_free_memory_given(free_gib):
    free = int(free_gib * GIB)
    for shape in (GPT2_SMALL, LLAMA_1B):
        for element_bytes, packed, full_logits in ((2, True, False), (4, False, False), (2, False, True)):
            tokens = fitted_batch_tokens(free, shape, element_bytes, ROW, packed, full_logits)
            slice_bytes = loss_slice_positions(shape, element_bytes, loss_slice_budget(free)) * shape.vocabulary * (
                element_bytes + 8)
            needed = tokens * token_bytes(shape, element_bytes, ROW, packed, full_logits) + RESERVE_BYTES + slice_bytes
            assert ROW <= tokens and needed <= free * USABLE_SHARE


def test_a_bigger_model_wider_values_packing_masks_or_whole_logits_take_fewer_tokens():
    free = 6 * GIB
    gpt2 = fitted_batch_tokens(free, GPT2_SMALL, 2, ROW, packed=False, full_logits=False)
    assert fitted_batch_tokens(free, LLAMA_1B, 2, ROW, packed=False, full_logits=False) < gpt2
    assert fitted_batch_tokens(free, GPT2_SMALL, 4, ROW, packed=False, full_logits=False) < gpt2
    assert fitted_batch_tokens(free, GPT2_SMALL, 2, ROW, packed=True, full_logits=False) < gpt2
    assert fitted_batch_tokens(free, GPT2_SMALL, 2, ROW, packed=False, full_logits=True) < gpt2 / 2


def test_a_device_where_not_one_document_fits_is_refused_naming_both_sizes():
    with pytest.raises(NotEnoughMemory, match=r"the device has 1\.20 GiB free once the model is loaded; a batch "
                                              r"of one 1025-token document needs about 1\.[0-9]+ GiB\. Lower"):
        fitted_batch_tokens(int(1.2 * GIB), LLAMA_1B, 4, ROW, packed=True, full_logits=True)


def test_a_loss_slice_holds_its_float32_logits_within_its_budget():
    assert loss_slice_budget(None) == LOSS_SLICE_BYTES, "on CPU: the fixed budget"
    assert loss_slice_budget(2 * GIB) == GIB // 4, "on a device: at most an eighth of its free memory"
    positions = loss_slice_positions(GPT2_SMALL, 4, LOSS_SLICE_BYTES)
    assert positions * 32_000 * (4 + 8) <= LOSS_SLICE_BYTES < (positions + 1) * 32_000 * (4 + 8)
    assert loss_slice_positions(ModelShape(8, 32, 10**9), 4, LOSS_SLICE_BYTES) == 16, "never fewer than 16"
