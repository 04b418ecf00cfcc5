"""The model probe on a tiny GPT-2 built here: losses equal a direct forward pass whatever the
batching, long documents truncated and counted, a folder that is not a model refused by name."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the model probe needs the `probe` extra (pip install -e '.[probe]')")

import torch  # noqa: E402

from bench.tiny_model import WORDS, save_tiny_model  # noqa: E402
from fw_assets.probe.causal_lm import CausalLM, NotAModel  # noqa: E402
from fw_assets.probe.probes import ProbeSpec  # noqa: E402
from fw_assets.probe.resources import ProbeResource  # noqa: E402

TEXTS = [" ".join(WORDS[(i * 7) % 11 :][: 3 + i % 9]) + (" zebra" if i % 4 == 0 else "") for i in range(23)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-gpt2"))


def direct_nll(folder: Path, text: str, max_tokens: int) -> tuple[int, float]:
    """Tokens and summed NLL of one text from the model's own forward pass with labels."""
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


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_asked_for_without_a_cuda_device_is_refused_clearly(tiny_model):
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
