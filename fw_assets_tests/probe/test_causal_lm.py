"""The model probe on tiny models built here: losses equal a direct forward pass and the whole
float32 logits of one masked batch whatever the batching, layout and loss slices (packed where the
architecture keeps packed documents apart, from the logits where its head is more than the output
embedding), in the dtype the probe says; long documents truncated and counted, a folder that is
not a model refused by name."""

from pathlib import Path

import numpy as np
import pytest

from bench.tiny_model import WORDS, save_tiny_architecture, save_tiny_model
from fw_assets.probe.batching import PACKED, PADDED
from fw_assets.probe.causal_lm import CausalLM, NotAModel
from fw_assets.probe.probes import ProbeSpec
from fw_assets.probe.resources import ProbeResource

pytestmark = pytest.mark.needs_extra("probe")

TEXTS = [" ".join(WORDS[(i * 7) % 11 :][: 3 + i % 9]) + (" zebra" if i % 4 == 0 else "") for i in range(23)]
# Documents of 0 to ~400 words, some cut at max_tokens 300: several batches, each of several loss
# slices with a 32,000-word vocabulary (device_memory.loss_slice_positions: 1,398 positions).
LONG_TEXTS = [" ".join(WORDS[(i * j) % len(WORDS)] for j in range((i * 37) % 400)) for i in range(40)]
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
        "num_key_value_heads": 1, "max_position_embeddings": 512, "vocab_size": 64}
# Architectures the probe meets (their transformers config class and its arguments): whether it
# packs their documents and computes their loss from the hidden states (Cohere scales its logits;
# Bloom's ALiBi attention takes no position ids).
ARCHITECTURES = {
    "llama": ("LlamaConfig", TINY, PACKED, True),
    "cohere": ("CohereConfig", TINY, PACKED, False),
    "bloom": ("BloomConfig", {"vocab_size": 64, "hidden_size": 32, "n_layer": 1, "n_head": 2}, PADDED, True),
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="module")
def wide_vocabulary_model(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("vocabulary-32k"), vocabulary=32_000, positions=512)


@pytest.fixture(scope="module")
def wide_reference(wide_vocabulary_model) -> np.ndarray:
    return whole_logits_nll(wide_vocabulary_model, LONG_TEXTS, 300)


def tiny_config(architecture: str):
    import transformers

    name, arguments, _, _ = ARCHITECTURES[architecture]
    return getattr(transformers, name)(**arguments)


def whole_logits_nll(folder: Path, texts: list[str], max_tokens: int) -> np.ndarray:
    """The reference: each text's summed NLL from one right-padded batch with its attention
    mask, the whole logits in float32 (batch x length x vocabulary)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    sequences = [[tokenizer.bos_token_id] + tokenizer(t, add_special_tokens=False)["input_ids"][:max_tokens]
                 for t in texts]
    ids = torch.zeros((len(sequences), max(map(len, sequences))), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)], mask[row, : len(sequence)] = torch.tensor(sequence), 1
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        return (nll * mask[:, 1:]).sum(dim=1).double().numpy()


def relative_difference(found: np.ndarray, expected: np.ndarray) -> float:
    return float((np.abs(found - expected) / np.maximum(np.abs(expected), 1e-12)).max())


def direct_nll(folder: Path, text: str, max_tokens: int) -> tuple[int, float]:
    """Tokens and summed NLL of one text from the model's own forward pass with labels."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = [tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False)["input_ids"][:max_tokens]
    with torch.inference_mode():
        mean = model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
    return len(ids) - 1, mean * (len(ids) - 1)


@pytest.mark.parametrize("batch_tokens", [16, 4096])
def test_losses_equal_a_direct_forward_pass_whatever_the_batching(tiny_model, batch_tokens):
    spec = ProbeSpec("tiny", tiny_model, max_tokens=16, batch_tokens=batch_tokens)
    tokens, nll, nbytes, truncated = CausalLM(spec).score(TEXTS)
    for i, text in enumerate(TEXTS):
        expected_tokens, expected_nll = direct_nll(tiny_model, text, 16)
        assert tokens[i] == expected_tokens
        assert abs(nll[i] - expected_nll) < 1e-4 * max(1.0, expected_nll)
    assert not truncated.any()
    assert (nbytes == [len(t.encode()) for t in TEXTS]).all()


@pytest.mark.parametrize("layout", [PACKED, PADDED])
@pytest.mark.parametrize("batch_tokens", [2048, None])
def test_sliced_losses_in_either_layout_equal_the_whole_float32_logits_within_1e_6(
    wide_vocabulary_model, wide_reference, layout, batch_tokens
):
    probe = CausalLM(ProbeSpec("wide", wide_vocabulary_model, max_tokens=300, batch_tokens=batch_tokens), layout=layout)
    assert probe.sliced and probe.layout == layout and probe.slice_positions < probe.batch_tokens
    scores = probe.score(LONG_TEXTS)
    assert relative_difference(scores.nll, wide_reference) <= 1e-6
    assert scores.truncated.any() and (scores.tokens[scores.truncated] == 300).all()
    assert (scores.tokens[~scores.truncated] == [len(t.split()) for t, cut in zip(LONG_TEXTS, scores.truncated)
                                                 if not cut]).all()


def test_chunks_read_ahead_come_back_with_their_keys_and_the_scores_of_one_call(wide_vocabulary_model):
    probe = CausalLM(ProbeSpec("wide", wide_vocabulary_model, max_tokens=300, batch_tokens=300))
    chunks = [(f"chunk {i}", LONG_TEXTS[i : i + 7]) for i in range(0, len(LONG_TEXTS), 7)]
    pools = list(probe.score_chunks(chunks))
    assert len(pools) > 1, "a pool is about POOL_BATCHES batches, not the whole input"
    assert [key for keys, _ in pools for key in keys] == [key for key, _ in chunks]
    whole = probe.score(LONG_TEXTS)
    for field in ("tokens", "nbytes", "truncated"):
        assert (np.concatenate([getattr(s, field) for _, s in pools]) == getattr(whole, field)).all()
    assert relative_difference(np.concatenate([s.nll for _, s in pools]), whole.nll) <= 1e-6


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_each_architecture_is_packed_and_sliced_as_far_as_its_losses_stay_equal(tmp_path, architecture):
    _, _, layout, sliced = ARCHITECTURES[architecture]
    folder = save_tiny_architecture(tmp_path / architecture, tiny_config(architecture))
    probe = CausalLM(ProbeSpec(architecture, folder, max_tokens=300, batch_tokens=1024))
    assert (probe.layout, probe.sliced) == (layout, sliced)
    assert relative_difference(probe.score(LONG_TEXTS).nll, whole_logits_nll(folder, LONG_TEXTS, 300)) <= 1e-6


def test_packing_a_model_that_cannot_keep_packed_documents_apart_is_refused(tmp_path):
    folder = save_tiny_architecture(tmp_path / "bloom", tiny_config("bloom"))
    with pytest.raises(NotAModel, match="Probe bloom: the model does not keep packed documents apart"):
        CausalLM(ProbeSpec("bloom", folder, max_tokens=64), layout=PACKED)


def test_a_model_whose_attention_looks_ahead_is_refused(tmp_path):
    """BERT loaded as a causal LM without `is_decoder` attends both ways: its losses would depend
    on the padding after a document. Weights drawn wide, so that attention tells tokens apart."""
    from transformers import BertConfig

    config = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, is_decoder=False, initializer_range=0.3)
    folder = save_tiny_architecture(tmp_path / "bert", config)
    with pytest.raises(NotAModel, match="Probe bert: the model's loss of a document changes with the documents "
                                        "batched after it: it is not a causal language model"):
        CausalLM(ProbeSpec("bert", folder, max_tokens=64))


def test_the_probe_runs_in_the_dtype_it_says(wide_vocabulary_model, wide_reference):
    """bfloat16 asked for on CPU: the weights and the computation are bfloat16, the losses near
    float32's (the load-time check holds them within 1e-2)."""
    import torch

    probe = CausalLM(ProbeSpec("wide", wide_vocabulary_model, max_tokens=300, dtype="bfloat16"))
    assert probe.model.dtype == torch.bfloat16 and probe.dtype == "bfloat16"
    assert CausalLM(ProbeSpec("wide", wide_vocabulary_model, max_tokens=300)).model.dtype == torch.float32
    assert relative_difference(probe.score(LONG_TEXTS).nll, wide_reference) < 1e-2


@pytest.mark.e2e
@pytest.mark.parametrize("layout", [PACKED, PADDED])
def test_compiled_as_on_cuda_the_losses_stay_those_of_the_whole_float32_logits(tiny_model, layout):
    """torch.compile (the default on CUDA) on CPU: batches of two shapes or more (a pool's last is
    smaller), so that the recompiling for new shapes is taken too."""
    texts = TEXTS * 3
    probe = CausalLM(ProbeSpec("tiny", tiny_model, max_tokens=16, batch_tokens=32), layout=layout, compiled=True)
    scores = probe.score(texts)
    assert probe.compiled and not probe.compile_failure
    assert relative_difference(scores.nll, whole_logits_nll(tiny_model, texts, 16)) <= 1e-6


def test_long_documents_are_cut_at_max_tokens_and_counted(tiny_model):
    spec = ProbeSpec("tiny", tiny_model, max_tokens=4, batch_tokens=16)
    tokens, nll, nbytes, truncated = CausalLM(spec).score(TEXTS)
    lengths = np.array([len(t.split()) for t in TEXTS])
    assert (truncated == (lengths > 4)).all()
    assert (tokens == np.minimum(lengths, 4)).all()
    text = TEXTS[1]
    assert abs(nll[1] - direct_nll(tiny_model, text, 4)[1]) < 1e-4
    assert nbytes[1] == len(" ".join(text.split()[:4]).encode())


def test_a_document_far_longer_than_read_scores_as_its_first_tokens_encoded_whole(tiny_model):
    """Encoded from a prefix (long words and runs of spaces make the first prefix too short, so it
    grows): the scored tokens are those of the whole text's encoding."""
    text = " ".join(("reading" * (i % 5 + 1)) + " " * (i % 7) + WORDS[i % len(WORDS)] for i in range(5_000))
    probe = CausalLM(ProbeSpec("tiny", tiny_model, max_tokens=100, batch_tokens=4096))
    tokens, nll, nbytes, truncated = probe.score([text])
    expected_tokens, expected_nll = direct_nll(tiny_model, text, 100)
    assert truncated[0] and tokens[0] == expected_tokens == 100
    assert abs(nll[0] - expected_nll) < 1e-3


def test_a_model_with_fewer_embeddings_than_its_tokenizer_has_ids_is_refused_naming_both(tmp_path):
    folder = save_tiny_model(tmp_path / "short-vocabulary", missing_ids=3)
    vocabulary = len(WORDS) + 3  # the words and three special tokens
    with pytest.raises(NotAModel) as refused:
        CausalLM(ProbeSpec("short", folder, max_tokens=64))
    message = str(refused.value)
    for expected in (f"Probe short: the tokenizer in {folder} has {vocabulary} token ids",
                     f"the model's embedding has {vocabulary - 3} rows", "nothing was published"):
        assert expected in message, message


def test_a_folder_that_is_not_a_model_is_refused_naming_it(tmp_path):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    with pytest.raises(NotAModel, match=f"{folder} is not a Hugging Face causal language model directory "
                                        "\\(OSError: it has no config.json\\)"):
        CausalLM(ProbeSpec("notes", folder))


def test_the_identity_is_the_model_directorys_bytes(tiny_model, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in tiny_model.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    digest = ProbeSpec("tiny", tiny_model).identity()["model_sha256"]
    assert ProbeSpec("tiny", copy).identity()["model_sha256"] == digest, "same bytes, same identity"
    config = copy / "config.json"
    config.write_text(config.read_text() + " ")
    assert ProbeSpec("tiny", copy).identity()["model_sha256"] != digest


def test_max_tokens_beyond_the_models_context_is_refused_before_scoring(tiny_model):
    with pytest.raises(ValueError, match=r"Probe tiny: max_tokens 200 needs 201 positions \(one for the BOS prefix\), "
                                         r"but the model .* has 128"):
        CausalLM(ProbeSpec("tiny", tiny_model, max_tokens=200, batch_tokens=4096))


def test_cuda_asked_for_without_a_cuda_device_is_refused_clearly(tiny_model):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(ValueError, match="Probe tiny: device 'cuda' was asked for, but torch sees no CUDA device here"):
        CausalLM(ProbeSpec("tiny", tiny_model, device="cuda", max_tokens=64))


def test_the_fingerprint_follows_the_model_files_without_reading_them(tiny_model, tmp_path, monkeypatch):
    """The code version's fingerprint is computed wherever the code location loads: it must not
    hash gigabytes of weights there, yet change when a weight file does."""
    import shutil

    from fw_assets.probe import probes

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    spec = ProbeResource(model_dir=str(model)).spec()
    monkeypatch.setattr(probes, "directory_digest", lambda folder: pytest.fail("read the weights"))
    before = spec.fingerprint()
    weights = next(p for p in model.iterdir() if p.suffix in (".safetensors", ".bin"))
    weights.write_bytes(weights.read_bytes() + b"\0")
    assert spec.fingerprint() != before
