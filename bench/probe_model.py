"""The model probe's tokens per second beside the same model's dense-batch ceiling, on the device here.

    python -m bench.probe_model                      # sized for the device found (CPU: GPT-2 small only)
    python -m bench.probe_model --models gpt2-small --documents 48 --max-tokens 256
    python -m bench.probe_model --models llama-1b --documents 4 --max-tokens 64 --batch-tokens 512

Each model is built from its config (random weights, saved in float32 by save_pretrained beside a
byte-level BPE tokenizer trained on the bench's English texts; no hub), then measured:

- ceiling: its forward pass and per-token loss (sliced as the probe slices it) on full rows of
  max_tokens + 1 random tokens, as many rows as the probe's batch holds, in the probe's dtype with
  SDPA attention, compiled where the probe compiles (CUDA): the probe without padding, reading or
  tokenizing;
- probe: `CausalLM` as `probe_loss` builds it (defaults for the device), over generated documents
  of FineWeb-Edu's length distribution (fw_assets.synthetic: lognormal words, median 620), fed 256
  texts at a time as `probe_loss` feeds them, after a warm-up (compiling) on other documents;
- variants: the other layout; on CUDA uncompiled, and float32 on a subset (uncompiled), with how far
  the default dtype's losses are from float32's.

Prints each row as it is measured, then one markdown table: tokens scored per second of wall time
and per CPU-second of this process (all its threads: the reading thread's encoding included), the
share of the ceiling (on CUDA of its wall-time rate: the device is what is spent; on CPU of its
CPU-time rate, which other work on a shared machine does not skew), and the peak memory (CUDA:
allocated on the device; CPU: the process's RSS, its peak reset before each row).
"""

import argparse
import gc
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from bench.suite import machine
from bench.texts import bigram_texts
from fw_assets.lib.markdown import table
from fw_assets.probe.batching import PACKED, PADDED
from fw_assets.probe.causal_lm import CausalLM
from fw_assets.probe.probes import ProbeSpec
from fw_assets.probe.scoring import TEXT_BATCH_ROWS
from fw_assets.synthetic.generator import sample_table

VOCABULARY = 32_000  # the models' (the issue's GPT-2 small and TinyLlama's)
TOKENIZER_WORDS = 8_000  # the BPE's vocabulary: ~1.3 tokens a word of the bench's English
DUMP = "CC-MAIN-2013-20"
# (documents measured, documents warmed up on) by model and device kind
DOCUMENTS = {"cuda": {"gpt2-small": (12_000, 3_000), "llama-1b": (2_000, 600)},
             "cpu": {"gpt2-small": (48, 4), "llama-1b": (4, 1)}}
CEILING_SECONDS = {"cuda": 10.0, "cpu": 0.0}  # at least two batches either way
FLOAT32_SUBSET = 0.25  # of the documents, scored in float32 to compare the default dtype's losses with
HEADER = ["model", "setting", "dtype", "layout", "compiled", "batch tokens", "tokens", "tokens/s", "of the ceiling",
          "tokens/CPU-s", "peak GiB"]


def model_config(name: str, positions: int, special: int):
    """The config of model `name`, its BOS and EOS token `special`."""
    from transformers import GPT2Config, LlamaConfig

    ends = {"bos_token_id": special, "eos_token_id": special}
    if name == "gpt2-small":
        return GPT2Config(vocab_size=VOCABULARY, n_positions=positions, n_embd=768, n_layer=12, n_head=12, **ends)
    if name == "llama-1b":  # TinyLlama 1.1B's shape
        return LlamaConfig(vocab_size=VOCABULARY, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                           num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=positions, **ends)
    raise ValueError(f"no model {name!r}: gpt2-small or llama-1b")


def documents(count: int, seed: int) -> list[str]:
    """`count` English texts of FineWeb-Edu's length distribution (the synthetic dumps' word counts)."""
    rows = sample_table(DUMP, 0, count, seed, 0.0, 0.0, 0.0)
    words = pc.list_value_length(pc.utf8_split_whitespace(rows.column("text"))).to_numpy()
    return bigram_texts(words, np.random.default_rng(seed))


def save_model(folder: Path, name: str, max_tokens: int, texts: list[str]) -> Path:
    """A model of `name`'s shape with random weights, in float32, and a BPE tokenizer of `texts`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer, core.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    core.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=TOKENIZER_WORDS, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    torch.manual_seed(0)
    config = model_config(name, positions=max_tokens + 1, special=tokenizer.bos_token_id)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class Peak:
    """Peak memory since the last reset: the device's allocated bytes on CUDA, the RSS on CPU."""

    def __init__(self, device) -> None:
        import torch

        self.torch, self.device = torch, device

    def reset(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)
            self.torch.cuda.reset_peak_memory_stats(self.device)
        else:
            Path("/proc/self/clear_refs").write_text("5")  # the kernel's peak RSS (VmHWM) restarts from now

    def gib(self) -> float:
        if self.device.type == "cuda":
            return self.torch.cuda.max_memory_allocated(self.device) / 2**30
        status = Path("/proc/self/status").read_text().splitlines()
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 2**20


def scored(probe: CausalLM, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Tokens scored and summed NLL per text, fed as probe_loss feeds them."""
    chunks = [(start, texts[start : start + TEXT_BATCH_ROWS]) for start in range(0, len(texts), TEXT_BATCH_ROWS)]
    results = [scores for _, scores in probe.score_chunks(chunks)]
    return np.concatenate([s.tokens for s in results]), np.concatenate([s.nll for s in results])


class Rate:
    """Tokens scored, over the wall time and over this process's CPU time (all its threads)."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def of(self, tokens: int) -> tuple[float, float]:
        return tokens / (time.perf_counter() - self.wall), tokens / (time.process_time() - self.cpu)


def ceiling(probe: CausalLM, seconds: float) -> tuple[int, tuple[float, float], float]:
    """(tokens, their Rate, peak GiB) of the forward pass and the per-token loss on full random rows."""
    torch = probe.torch
    if not probe.sliced:
        raise ValueError("the ceiling computes the loss from the hidden states; this model's head is more")
    width = probe.max_tokens + 1
    rows = max(1, probe.batch_tokens // width)
    forward = torch.compile(probe.backbone) if probe.compiled else probe.backbone
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, probe.shape.vocabulary, (rows, width), generator=generator).to(probe.device)
    targets = ids[:, 1:].reshape(-1)

    def step():
        with torch.inference_mode():
            hidden = forward(input_ids=ids, use_cache=False).last_hidden_state[:, :-1].reshape(-1, probe.shape.hidden)
            total = torch.zeros((), dtype=torch.float64, device=probe.device)
            for start in range(0, len(targets), probe.slice_positions):
                logits = probe.head(hidden[start : start + probe.slice_positions]).float()
                part = targets[start : start + probe.slice_positions]
                total += torch.nn.functional.cross_entropy(logits, part, reduction="none").sum().double()
            return total

    step().item()  # warm-up: compiles where compiled
    peak = Peak(probe.device)
    peak.reset()
    rate, began, batches = Rate(), time.perf_counter(), 0
    while batches < 2 or time.perf_counter() - began < seconds:
        step().item()
        batches += 1
    tokens = batches * rows * (width - 1)
    return tokens, rate.of(tokens), peak.gib()


def measured_probe(probe: CausalLM, texts: list[str], warmup: list[str]):
    """(tokens scored and summed NLL per text, their Rate, peak GiB) of the probe, after a warm-up."""
    scored(probe, warmup)
    peak = Peak(probe.device)
    peak.reset()
    rate = Rate()
    tokens, nll = scored(probe, texts)
    return tokens, nll, rate.of(int(tokens.sum())), peak.gib()


def loaded(folder: Path, args, **choices) -> CausalLM:
    import torch

    gc.collect()  # the previous probe's memory back first (its compiled graphs too): the batch is sized
    torch._dynamo.reset()  # from what is free
    dtype = choices.pop("dtype", "auto")
    spec = ProbeSpec(folder.name, folder, device=args.device, max_tokens=args.max_tokens,
                     batch_tokens=args.batch_tokens, dtype=dtype)
    probe = CausalLM(spec, **choices)
    if probe.device.type == "cuda":
        probe.torch.cuda.empty_cache()
    return probe


def row(name: str, setting: str, probe: CausalLM, tokens: int, rate: tuple, best: tuple, peak: float) -> list:
    share = rate[0] / best[0] if probe.device.type == "cuda" else rate[1] / best[1]
    shown = [name, setting, probe.dtype, probe.layout, "yes" if probe.compiled and not probe.compile_failure else "no",
             f"{probe.batch_tokens:,}", f"{tokens:,}", f"{rate[0]:,.0f}", f"{share:.1%}", f"{rate[1]:,.0f}",
             f"{peak:.2f}"]
    print("| " + " | ".join(shown) + " |", flush=True)
    if probe.compile_failure:
        print(f"  torch.compile failed: {probe.compile_failure}", flush=True)
    return shown


def agreement(default: np.ndarray, float32: np.ndarray, tokens: np.ndarray) -> str:
    """How far the default dtype's per-document losses are from float32's: the largest relative
    difference of a document's loss and the rank correlation of the losses."""
    scored_docs = tokens > 0
    a, b = default[scored_docs] / tokens[scored_docs], float32[scored_docs] / tokens[scored_docs]
    ranks = [np.argsort(np.argsort(x)) for x in (a, b)]
    return (f"{scored_docs.sum():,} documents: largest relative difference of a document's loss "
            f"{np.max(np.abs(a - b) / np.abs(b)):.2e}, rank correlation {np.corrcoef(*ranks)[0, 1]:.6f}")


def measure_model(name: str, args, work: Path) -> tuple[list[list], list[str]]:
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    count, warm = DOCUMENTS[kind][name]
    count, warm = args.documents or count, max(1, (args.documents or count) * warm // count)
    texts, warmup = documents(count, seed=1), documents(warm, seed=2)
    folder = save_model(work / name, name, args.max_tokens, texts[:2_000])
    rows, notes = [], []
    probe = loaded(folder, args)
    tokens, best, peak = ceiling(probe, CEILING_SECONDS[kind])
    rows.append(row(name, "ceiling: full rows, no padding or reading", probe, tokens, best, best, peak))
    tokens, nll, rate, peak = measured_probe(probe, texts, warmup)
    rows.append(row(name, "probe, defaults", probe, int(tokens.sum()), rate, best, peak))
    other, default_dtype = PADDED if probe.layout == PACKED else PACKED, probe.dtype
    del probe
    variants = [] if args.no_variants else [(f"probe, {other}", {"layout": other})]
    if kind == "cuda" and not args.no_variants:
        variants.append(("probe, uncompiled", {"compiled": False}))
    for setting, choices in variants:
        probe = loaded(folder, args, **choices)
        counted, _, rate, peak = measured_probe(probe, texts, warmup)
        rows.append(row(name, setting, probe, int(counted.sum()), rate, best, peak))
        del probe
    if kind == "cuda":
        subset = texts[: max(1, int(len(texts) * FLOAT32_SUBSET))]
        probe = loaded(folder, args, dtype="float32", compiled=False)
        counted, float32, rate, peak = measured_probe(probe, subset, warmup[:8])
        rows.append(row(name, "probe, float32 (a subset)", probe, int(counted.sum()), rate, best, peak))
        notes.append(f"{name}: {default_dtype} against float32 on {agreement(nll[: len(subset)], float32, counted)}")
        del probe
    return rows, notes


def main(argv: list[str] | None = None) -> None:
    import torch

    parser = argparse.ArgumentParser(prog="python -m bench.probe_model", description=__doc__.splitlines()[0])
    found = "cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=found, help=f"default: {found} (what torch sees)")
    parser.add_argument("--models", default="gpt2-small,llama-1b" if found == "cuda" else "gpt2-small",
                        help="comma-separated: gpt2-small, llama-1b (default on CPU: gpt2-small alone, a 1.1B "
                             "model's batch of 4,096 tokens taking minutes on a few cores)")
    parser.add_argument("--documents", type=int, default=0, help="documents per model (default: by model and device)")
    parser.add_argument("--max-tokens", type=int, default=1024 if found == "cuda" else 256)
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the probe's for the device")
    parser.add_argument("--no-variants", action="store_true", help="the ceiling and the defaults only")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="where the models are saved")
    args = parser.parse_args(argv)
    described = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else machine()["cpu_model"]
    print(f"device {args.device} ({described}), torch {torch.__version__}, {torch.get_num_threads()} CPU threads; "
          f"max_tokens {args.max_tokens}", flush=True)
    rows, notes = [], []
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for name in args.models.split(","):
            measured, said = measure_model(name, args, Path(work))
            rows += measured
            notes += said
    print()
    print(table(HEADER, rows))
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
