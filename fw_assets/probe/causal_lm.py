"""The model probe: a local Hugging Face causal language model scoring texts with its own tokenizer.

Loaded from a directory written by `save_pretrained` (config, weights, tokenizer files), never from
a hub. Each text is encoded (from a prefix long enough, never whole: a document of any length costs
the memory of a few thousand characters), prefixed with the tokenizer's BOS token (else its EOS
token) so its first token is scored too, and cut after `max_tokens` scored tokens (counted as
truncated).
Documents are sorted by length and batched so that a batch holds at most `batch_tokens` padded
tokens: memory is about the model plus batch_tokens x vocabulary x 4 bytes of logits, whatever the
dump's size. `device` is `cpu` or `cuda` (`cuda:N`); on CUDA the model runs in its saved dtype.
"""

from pathlib import Path

import numpy as np

from fw_assets.probe.probes import ProbeSpec

# A text longer than a model probe reads is encoded from a prefix: 8 characters a token to begin
# with (tokens of web text average about 4), and MARGIN_TOKENS past max_tokens, so that the cut
# never changes a token that is scored.
CHARACTERS_PER_TOKEN = 8
MARGIN_TOKENS = 32


class NotAModel(ValueError):
    """The configured directory holds no loadable causal language model, or none the probe's
    settings fit."""


class CausalLM:
    def __init__(self, spec: ProbeSpec) -> None:
        import torch  # here: only the model probe's step needs torch and transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(spec.model_dir)
        try:
            if not (folder / "config.json").is_file():
                raise OSError("it has no config.json")
            self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError, KeyError) as error:
            raise NotAModel(
                f"Probe {spec.name}: {folder} is not a Hugging Face causal language model directory "
                f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}). Point "
                "FW_PROBE_MODEL_DIR (or the probe resource's model_dir) at a folder written by "
                "save_pretrained (config.json, weights, tokenizer files); nothing was published."
            ) from error
        self.max_tokens, self.batch_tokens = spec.max_tokens, spec.batch_tokens
        bos, eos = self.tokenizer.bos_token_id, self.tokenizer.eos_token_id
        self.prefix = bos if bos is not None else eos
        self._refuse_a_context_too_short(spec)
        self._refuse_ids_without_embeddings(spec)
        if spec.device.startswith("cuda") and not torch.cuda.is_available():
            raise NotAModel(
                f"Probe {spec.name}: device {spec.device!r} was asked for, but torch sees no CUDA device here "
                f"(torch {torch.__version__}). Run on a GPU machine with a CUDA build of torch, or set the "
                "probe's device to 'cpu' (FW_PROBE_DEVICE); nothing was published."
            )
        self.torch = torch
        self.device = torch.device(spec.device)
        self.model.to(self.device).eval()

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

    def score(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per text: tokens scored, summed NLL (nats), UTF-8 bytes of the scored text, truncated."""
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
        sequences = [([self.prefix] if self.prefix is not None else []) + ids for ids in kept]
        tokens = np.array([max(len(s) - 1, 0) for s in sequences], np.int64)
        nll = np.zeros(len(texts))
        for batch in self._batches(sequences):
            nll[batch] = self._summed_nll([sequences[i] for i in batch])
        return tokens, nll, nbytes, truncated

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

    def _batches(self, sequences: list[list[int]]) -> list[list[int]]:
        """Indices of sequences, longest first, grouped to at most batch_tokens padded tokens."""
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        batches, current = [], []
        for i in order:
            width = len(sequences[current[0]]) if current else len(sequences[i])
            if current and (len(current) + 1) * width > self.batch_tokens:
                batches.append(current)
                current = []
            current.append(i)
        return batches + [current] if current else batches

    def _summed_nll(self, sequences: list[list[int]]) -> np.ndarray:
        torch = self.torch
        width = max(len(s) for s in sequences)
        ids = torch.zeros((len(sequences), width), dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, sequence in enumerate(sequences):
            ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
            mask[row, : len(sequence)] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
            return (nll * mask[:, 1:]).sum(dim=1).cpu().numpy().astype(np.float64)
