"""A model probe's dtype: resolved from its setting, its device and the saved weights' dtype (read
from the config or a weight file's header, never the weights), and part of its identity and
fingerprint, so that running it in another dtype marks its losses stale."""

import json
import struct
from pathlib import Path

import pytest

from fw_assets.probe.probes import ProbeSpec, saved_dtype


def model_folder(folder: Path, config: dict, header: dict | None = None) -> Path:
    """A model directory holding `config` and, with `header`, a safetensors file of that header
    (no tensor bytes: only the header is ever read here)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    if header is not None:
        encoded = json.dumps(header).encode()
        (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(encoded)) + encoded)
    return folder


@pytest.mark.parametrize(
    ("saved", "device", "setting", "runs_in"),
    [
        ("float32", "cpu", "auto", "float32"),
        ("float32", "cuda", "auto", "bfloat16"),
        ("float32", "cuda:1", "auto", "bfloat16"),
        ("float32", "cuda", "float32", "float32"),
        ("bfloat16", "cpu", "auto", "bfloat16"),
        ("float16", "cuda", "auto", "float16"),
        ("bfloat16", "cpu", "float32", "float32"),
    ],
)
def test_the_dtype_a_probe_runs_in(tmp_path, saved, device, setting, runs_in):
    folder = model_folder(tmp_path / "model", {"model_type": "gpt2", "dtype": saved})
    assert ProbeSpec("lm", folder, device=device, dtype=setting).run_dtype() == runs_in


def test_the_saved_dtype_is_the_configs_else_the_first_floating_tensor_of_the_weights_else_float32(tmp_path):
    assert saved_dtype(model_folder(tmp_path / "older", {"torch_dtype": "float16"})) == "float16"
    header = {"__metadata__": {"format": "pt"}, "a.position_ids": {"dtype": "I64"}, "b.weight": {"dtype": "BF16"}}
    assert saved_dtype(model_folder(tmp_path / "header", {"model_type": "llama"}, header)) == "bfloat16"
    assert saved_dtype(model_folder(tmp_path / "unsaid", {"model_type": "llama"})) == "float32"
    damaged = model_folder(tmp_path / "damaged", {"model_type": "llama"})
    (damaged / "model.safetensors").write_bytes(b"\xff" * 8 + b"{")
    assert saved_dtype(damaged) == "float32", "an unreadable header: the weights' loader says what is wrong"


def test_a_config_that_is_not_json_is_refused_naming_it(tmp_path):
    folder = model_folder(tmp_path / "model", {})
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=f"Probe model directory {folder}: config.json cannot be read as JSON"):
        ProbeSpec("lm", folder).identity()


def test_a_dtype_that_is_none_of_the_probes_is_refused(tmp_path):
    with pytest.raises(ValueError, match="Probe lm: dtype 'fp8' is not one of auto, float32, bfloat16, float16"):
        ProbeSpec("lm", tmp_path, dtype="fp8")


def test_the_dtype_run_in_is_part_of_the_identity_and_the_fingerprint(tmp_path):
    """What decides the losses, however it is asked for: bfloat16 by name on CPU and by default on
    CUDA are the same probe; float32 is another."""
    folder = model_folder(tmp_path / "model", {"model_type": "gpt2", "dtype": "float32"})
    cpu, cuda, named = (ProbeSpec("lm", folder, device="cpu"), ProbeSpec("lm", folder, device="cuda"),
                        ProbeSpec("lm", folder, device="cpu", dtype="bfloat16"))
    assert cpu.identity()["dtype"] == "float32" and cuda.identity()["dtype"] == "bfloat16"
    assert cpu.identity()["model_sha256"] == cuda.identity()["model_sha256"]
    assert cpu.identity() != cuda.identity() == named.identity()
    assert cpu.fingerprint() != cuda.fingerprint() == named.fingerprint()
    wider = ProbeSpec("lm", folder, device="cuda", batch_tokens=65_536)
    assert wider.identity() == cuda.identity(), "the batch size decides no loss"
