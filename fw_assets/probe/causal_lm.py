"""The model probe: a local Hugging Face causal language model scoring texts with its own tokenizer.

Loaded from a directory written by `save_pretrained` (config, weights, tokenizer files), never from
a hub, in the dtype the probe resolves (probes.py: bfloat16 on CUDA for float32 weights unless the
probe says otherwise), with PyTorch's SDPA attention where the model has it. Each text is encoded
(from a prefix long enough, never whole: a document of any length costs the memory of a few
thousand characters), prefixed with the tokenizer's BOS token (else its EOS token) so its first
token is scored too, and cut after `max_tokens` scored tokens (counted as truncated).

Texts are encoded on a thread of their own (prefetch.py), up to POOLS_AHEAD pools ahead of the
device; a pool is about POOL_BATCHES batches of sequences, sorted by length together and laid out
(batching.py) packed where the model keeps packed sequences apart, else padded. The loss is the
last hidden states times the output embedding, a slice of positions at a time (the model's own
logits where they are something else, e.g. capped): memory is the model, one batch's activations
and one slice's float32 logits (device_memory.py), whatever the batch. Both choices are checked
when the model is loaded, on a few sequences: each must give the losses of a document scored alone.

`device` is `cpu` or `cuda` (`cuda:N`). A batch holds the probe's `batch_tokens`, by default
CPU_BATCH_TOKENS on CPU and on CUDA what the memory free once the model is loaded holds; on CUDA
the forward pass is compiled (torch.compile), and runs uncompiled, with a warning, should that fail.
"""

import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fw_assets.probe.batching import LAYOUTS, PACKED, PADDED, Batch, batches
from fw_assets.probe.device_memory import (
    CPU_BATCH_TOKENS,
    ModelShape,
    NotEnoughMemory,
    fitted_batch_tokens,
    loss_slice_budget,
    loss_slice_positions,
)
from fw_assets.probe.prefetch import prefetched
from fw_assets.probe.probes import AUTO, ProbeSpec

# A text longer than a model probe reads is encoded from a prefix: 8 characters a token to begin
# with (tokens of web text average about 4), and MARGIN_TOKENS past max_tokens, so that the cut
# never changes a token that is scored.
CHARACTERS_PER_TOKEN = 8
MARGIN_TOKENS = 32
# Batches' worth of sequences sorted by length together: the more, the less padding between
# neighbours and the longer the first batch waits for its texts.
POOL_BATCHES = 16
POOLS_AHEAD = 2
# The load-time check: a few sequences of these lengths (cut to max_tokens), and how far apart a
# document's summed loss may be, relatively, between a batch and the document scored alone (float32:
# a different order of the same sums; half precision: its rounding, ~1e-3 on a trained model). A
# model is refused as looking ahead only past LOOKING_AHEAD times that: a refusal ends the run,
# where a failed check of packing or slicing only falls back to padding or the model's logits.
CHECK_LENGTHS = (23, 9, 4)
AGREEMENT = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-2}
LOOKING_AHEAD = 10
# Config settings by which transformers' models change their logits after the output embedding
# (a cap, a scale): the loss is then computed from the model's logits, whatever the check finds
# (a cap changes nothing on the small logits of a model that has not been trained).
LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling", "logits_soft_cap")


class NotAModel(ValueError):
    """The configured directory holds no loadable causal language model, or none the probe's
    settings fit."""


class Scores(NamedTuple):
    """Per text: tokens scored, summed NLL (nats), UTF-8 bytes of the scored text, truncated."""

    tokens: np.ndarray
    nll: np.ndarray
    nbytes: np.ndarray
    truncated: np.ndarray


@dataclass(frozen=True)
class Pool:
    """Texts of consecutive chunks, encoded and batched (each batch's arrays as host tensors, in
    pinned memory for a CUDA device): what the device scores in one go."""

    keys: list
    sequences: list[np.ndarray]
    nbytes: np.ndarray
    truncated: np.ndarray
    batches: list[dict]


class CausalLM:
    """`layout` and `compiled` choose what the probe otherwise decides (the benchmark compares
    them): PADDED or PACKED (refused where the model cannot pack), and whether to compile."""

    def __init__(self, spec: ProbeSpec, layout: str | None = None, compiled: bool | None = None) -> None:
        import torch  # here: only the model probe's step needs torch and transformers

        self.torch, self.name = torch, spec.name
        self.device = torch.device(spec.device)
        self.dtype = spec.run_dtype()
        self._refuse_a_missing_device(spec)
        self.tokenizer, self.model = self._loaded(spec)
        self.max_tokens = spec.max_tokens
        bos, eos = self.tokenizer.bos_token_id, self.tokenizer.eos_token_id
        self.prefix = bos if bos is not None else eos
        self._refuse_a_context_too_short(spec)
        self._refuse_ids_without_embeddings(spec)
        self.model.to(self.device).eval()
        self.shape = ModelShape.of(self.model.config)
        self.element_bytes = getattr(torch, self.dtype).itemsize
        self.backbone = self.model.base_model if self.model.base_model is not self.model else None
        self.head = self.model.get_output_embeddings()
        self.slice_positions = loss_slice_positions(self.shape, self.element_bytes, loss_slice_budget(self._free()))
        self.sliced, self.layout = self._checked_paths(layout)
        self.network = self.backbone if self.sliced else self.model
        self.batch_tokens = spec.batch_tokens or self._fitted_batch_tokens()
        self.compiled = self.device.type == "cuda" if compiled is None else compiled
        self._compiled_network = torch.compile(self.network) if self.compiled else None
        self.compile_failure = ""

    # --- loading ---------------------------------------------------------------------------

    def _refuse_a_missing_device(self, spec: ProbeSpec) -> None:
        torch = self.torch
        if self.device.type != "cuda":
            return
        if not torch.cuda.is_available():
            raise NotAModel(
                f"Probe {spec.name}: device {spec.device!r} was asked for, but torch sees no CUDA device here "
                f"(torch {torch.__version__}). Run on a GPU machine with a CUDA build of torch, or set the "
                "probe's device to 'cpu' (FW_PROBE_DEVICE); nothing was published."
            )
        if self.dtype == "bfloat16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            why = "the default on CUDA for float32 weights" if spec.dtype == AUTO else "as the probe sets it"
            raise NotAModel(
                f"Probe {spec.name}: dtype bfloat16 ({why}), but {torch.cuda.get_device_name(self.device)} has no "
                "bfloat16 arithmetic. Set the probe's dtype to float16 or float32 (FW_PROBE_DTYPE); nothing was "
                "published."
            )

    def _loaded(self, spec: ProbeSpec):
        """The tokenizer and the model, in the probe's dtype, with SDPA attention where the
        architecture has it (its default attention where not)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(spec.model_dir)
        settings = {"local_files_only": True, "dtype": getattr(self.torch, self.dtype)}
        try:
            if not (folder / "config.json").is_file():
                raise OSError("it has no config.json")
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            try:
                model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="sdpa", **settings)
            except ValueError as error:
                if "scaled_dot_product_attention" not in str(error):
                    raise
                model = AutoModelForCausalLM.from_pretrained(folder, **settings)
        except (OSError, ValueError, KeyError) as error:
            raise NotAModel(
                f"Probe {spec.name}: {folder} is not a Hugging Face causal language model directory "
                f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}). Point "
                "FW_PROBE_MODEL_DIR (or the probe resource's model_dir) at a folder written by "
                "save_pretrained (config.json, weights, tokenizer files); nothing was published."
            ) from error
        return tokenizer, model

    def _refuse_a_context_too_short(self, spec: ProbeSpec) -> None:
        """A position beyond the model's context would fail mid-run (or, on CUDA, corrupt memory)."""
        positions = getattr(self.model.config, "max_position_embeddings", None)
        needed = spec.max_tokens + (self.prefix is not None)
        if positions is not None and needed > positions:
            raise NotAModel(
                f"Probe {spec.name}: max_tokens {spec.max_tokens} needs {needed} positions (one for the BOS "
                f"prefix), but the model in {spec.model_dir} has {positions}. Set the probe's max_tokens to "
                f"at most {positions - (self.prefix is not None)}; nothing was published."
            )

    def _refuse_ids_without_embeddings(self, spec: ProbeSpec) -> None:
        """A token id beyond the model's embedding would fail mid-run (IndexError on CPU, a device
        assert on CUDA): a tokenizer and a model that do not belong together."""
        ids, rows = len(self.tokenizer), self.model.get_input_embeddings().num_embeddings
        if ids > rows:
            raise NotAModel(
                f"Probe {spec.name}: the tokenizer in {spec.model_dir} has {ids} token ids, but the model's embedding "
                f"has {rows} rows: ids {rows} and above cannot be scored. The tokenizer files and the weights "
                "belong to different models; save both from one (save_pretrained); nothing was published."
            )

    def _checked_paths(self, layout: str | None) -> tuple[bool, str]:
        """Whether the loss is computed from the hidden states (sliced) and the layout, each
        checked against the documents scored alone by the model's own forward pass: padded
        batches must agree (else this is no causal model), then the sliced loss and packing may."""
        if layout not in (None, *LAYOUTS):
            raise ValueError(f"layout is one of {LAYOUTS}, not {layout!r}")
        sequences = self._check_sequences()
        alone = np.concatenate([self._check_nll(PADDED, [s], sliced=False) for s in sequences])

        def agrees(nll: np.ndarray, slack: float = 1) -> bool:
            return bool(np.isclose(nll, alone, rtol=slack * AGREEMENT[self.dtype], atol=0, equal_nan=True).all())

        if not agrees(self._check_nll(PADDED, sequences, sliced=False), LOOKING_AHEAD):
            raise NotAModel(
                f"Probe {self.name}: the model's loss of a document changes with the documents batched after "
                "it: it is not a causal language model (its attention looks ahead); nothing was published."
            )
        plain_head = self.backbone is not None and self.head is not None and not any(
            getattr(self.model.config, setting, None) not in (None, 1, 1.0) for setting in LOGIT_TRANSFORMS)
        sliced = plain_head and agrees(self._check_nll(PADDED, sequences, sliced=True))
        if layout == PADDED:
            return sliced, PADDED
        try:
            packs = agrees(self._check_nll(PACKED, sequences, sliced))
        except (TypeError, ValueError, RuntimeError):  # no position ids, or a mask it cannot build
            packs = False
        if layout == PACKED and not packs:
            raise NotAModel(f"Probe {self.name}: the model does not keep packed documents apart.")
        return sliced, PACKED if packs else PADDED

    def _check_sequences(self) -> list[np.ndarray]:
        """Sequences of CHECK_LENGTHS (at most a row of max_tokens and the prefix), each its own
        run of ids the tokenizer and the embedding both have."""
        usable = min(len(self.tokenizer), self.model.get_input_embeddings().num_embeddings)
        prefix = [self.prefix] if self.prefix is not None else []
        row = self.max_tokens + len(prefix)
        return [np.array(prefix + [(7 * i + 3 * d + 1) % usable for i in range(min(n, row) - len(prefix))], np.int64)
                for d, n in enumerate(CHECK_LENGTHS)]

    def _check_nll(self, layout: str, sequences: list[np.ndarray], sliced: bool) -> np.ndarray:
        network = self.backbone if sliced else self.model
        with self.torch.inference_mode():
            sums = self.torch.zeros(len(sequences), dtype=self.torch.float64, device=self.device)
            for batch in batches(layout, sequences, sum(len(s) for s in sequences)):
                self._accumulate(self._staged(batch), sums, network, sliced, compiled=None)
            return sums.cpu().numpy()

    def _free(self) -> int | None:
        """Bytes free on a CUDA device (None on CPU), the allocator's cache given back first."""
        if self.device.type != "cuda":
            return None
        self.torch.cuda.empty_cache()
        return self.torch.cuda.mem_get_info(self.device)[0]

    def _fitted_batch_tokens(self) -> int:
        free = self._free()
        if free is None:
            return CPU_BATCH_TOKENS
        row = self.max_tokens + (self.prefix is not None)
        try:
            packed, full_logits = self.layout == PACKED, not self.sliced
            return fitted_batch_tokens(free, self.shape, self.element_bytes, row, packed, full_logits)
        except NotEnoughMemory as error:
            raise NotAModel(f"Probe {self.name}: {error}; nothing was published.") from error

    # --- scoring ---------------------------------------------------------------------------

    def score(self, texts: list[str]) -> Scores:
        """Per text: tokens scored, summed NLL (nats), UTF-8 bytes of the scored text, truncated."""
        ((_, scores),) = self.score_chunks([(None, texts)])
        return scores

    def score_chunks(self, chunks: Iterable[tuple[object, list[str]]]) -> Iterator[tuple[list, Scores]]:
        """Chunks of (key, texts), read and encoded on a thread of their own ahead of the device;
        per pool of consecutive chunks, their keys and the scores of their texts, in order."""
        with prefetched(self._pools(chunks), POOLS_AHEAD) as pools:
            for pool in pools:
                yield pool.keys, self._scored(pool)

    def _pools(self, chunks: Iterable[tuple[object, list[str]]]) -> Iterator[Pool]:
        keys, sequences, nbytes, truncated, tokens = [], [], [], [], 0
        for key, texts in chunks:
            encoded, chunk_bytes, chunk_truncated = self._sequences(texts)
            keys.append(key)
            sequences += encoded
            nbytes.append(chunk_bytes)
            truncated.append(chunk_truncated)
            tokens += sum(len(s) for s in encoded)
            if tokens >= POOL_BATCHES * self.batch_tokens:
                yield self._pool(keys, sequences, nbytes, truncated)
                keys, sequences, nbytes, truncated, tokens = [], [], [], [], 0
        if keys:
            yield self._pool(keys, sequences, nbytes, truncated)

    def _pool(self, keys: list, sequences: list[np.ndarray], nbytes: list, truncated: list) -> Pool:
        return Pool(keys, sequences, np.concatenate(nbytes), np.concatenate(truncated),
                    [self._staged(batch) for batch in batches(self.layout, sequences, self.batch_tokens)])

    def _staged(self, batch: Batch) -> dict:
        """A batch's arrays as host tensors; for a CUDA device in pinned memory, so that copying
        them waits for nothing the device is still computing (a copy from pageable memory waits
        for the device to finish the batch before)."""
        tensors = {f.name: getattr(batch, f.name) for f in fields(batch) if getattr(batch, f.name) is not None}
        tensors = {name: self.torch.from_numpy(array) for name, array in tensors.items()}
        if self.device.type == "cuda":
            tensors = {name: tensor.pin_memory() for name, tensor in tensors.items()}
        return tensors

    def _sequences(self, texts: list[str]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Each text's scored token sequence (prefix first), UTF-8 bytes of its scored text, and
        whether it was cut."""
        encoded = self._encode_beginnings(texts)
        truncated = np.array([len(ids) > self.max_tokens for ids in encoded], bool)
        kept = [ids[: self.max_tokens] for ids in encoded]
        nbytes = np.array(
            [
                len((self.tokenizer.decode(ids) if cut else text).encode())
                for ids, text, cut in zip(kept, texts, truncated)
            ],
            np.int64,
        )
        prefix = [self.prefix] if self.prefix is not None else []
        return [np.array(prefix + ids, np.int64) for ids in kept], nbytes, truncated

    def _encode_beginnings(self, texts: list[str]) -> list[list[int]]:
        """Each text's tokens, encoded from a beginning of the text just long enough: the text
        whole when it has at most max_tokens tokens, else a prefix with MARGIN_TOKENS more than
        max_tokens (a cut changes only the tokens of the word it falls in), so that memory stays
        that of a few thousand characters whatever a document's length. The prefix starts at
        CHARACTERS_PER_TOKEN characters a token and doubles while it holds too few tokens."""
        encoded: list[list[int]] = [[] for _ in texts]
        pending, characters = list(range(len(texts))), CHARACTERS_PER_TOKEN * (self.max_tokens + MARGIN_TOKENS)
        while pending:
            found = self.tokenizer([texts[i][:characters] for i in pending], add_special_tokens=False)["input_ids"]
            waiting = []
            for i, ids in zip(pending, found):
                whole = len(texts[i]) <= characters
                if whole or len(ids) > self.max_tokens + MARGIN_TOKENS:
                    encoded[i] = ids if whole else ids[: self.max_tokens + 1]  # one more: truncated
                else:
                    waiting.append(i)
            pending, characters = waiting, characters * 2
        return encoded

    def _scored(self, pool: Pool) -> Scores:
        torch = self.torch
        with torch.inference_mode():
            sums = torch.zeros(len(pool.sequences), dtype=torch.float64, device=self.device)
            for batch in pool.batches:  # queued on the device one after another; read back once
                self._accumulate(batch, sums, self.network, self.sliced, self._compiled_network)
            nll = sums.cpu().numpy()
        tokens = np.array([max(len(s) - 1, 0) for s in pool.sequences], np.int64)
        return Scores(tokens, nll, pool.nbytes, pool.truncated)

    def _accumulate(self, batch: dict, sums, network, sliced: bool, compiled) -> None:
        """Add each scored position's negative log-likelihood to its sequence's sum: from the
        hidden states times the output embedding (`sliced`) or the model's logits, float32
        logits for a slice of positions at a time. `batch`: a staged Batch."""
        on_device = {name: tensor.to(self.device, non_blocking=True) for name, tensor in batch.items()}
        inputs = {"input_ids": on_device["input_ids"], "use_cache": False}
        if "position_ids" in on_device:
            inputs["position_ids"] = on_device["position_ids"]
        output = self._forward(network, compiled, inputs)
        states = (output.last_hidden_state if sliced else output.logits).flatten(0, 1)
        predicting, targets, owners = on_device["predicting"], on_device["targets"], on_device["owners"]
        for start in range(0, len(predicting), self.slice_positions):
            part = slice(start, start + self.slice_positions)
            rows = states.index_select(0, predicting[part])
            logits = (self.head(rows) if sliced else rows).float()
            nll = self.torch.nn.functional.cross_entropy(logits, targets[part], reduction="none")
            sums.index_add_(0, owners[part], nll.double())

    def _forward(self, network, compiled, inputs: dict):
        if compiled is None or self._compiled_network is None:
            return network(**inputs)
        try:
            return compiled(**inputs)
        except self.torch.OutOfMemoryError:
            raise
        except Exception as error:  # noqa: BLE001 - the model runs uncompiled instead, with a warning
            self.compile_failure = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            warnings.warn(f"Probe {self.name}: torch.compile failed ({self.compile_failure}); "
                          "the model runs uncompiled.", stacklevel=2)
            self._compiled_network = None
            return network(**inputs)
