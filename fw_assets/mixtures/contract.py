"""The mixture contract, checked per recipe: the plan's token files, sample counts and epochs
(mixture_plan), and the built blends' error (megatron_indexes). Plain code, no Dagster; the assets
report it through fw_assets.contract_checks.ContractReport.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fw_assets.contracts.findings import ContractCheck, Violation
from fw_assets.layout import token_files, token_prefix
from fw_assets.lib.indexed_dataset import IndexedDatasetReader, optimal_token_dtype
from fw_assets.mixtures.cache import stage_caches
from fw_assets.mixtures.megatron_cache import SPLITS
from fw_assets.mixtures.plan import MixturePlan, StagePlan
from fw_assets.mixtures.recipe import NULL_TOKENIZER_CLASS

BLEND_WINDOW = 10_000  # samples
BLEND_WINDOW_TOLERANCE = 0.001  # of the window: 0.1 %
BLEND_END_TOLERANCE = 1.0  # samples
PLAN_FILE = "plan.json"  # where a violation of the whole plan is (the checks' `file` column)

TOKEN_FILES = ContractCheck(
    "token_files",
    "Every prefix's .bin, .idx and .docs.parquet are in its dump's published `tokenized` generation, "
    "written by the recipe's tokenizer, with the token width of its vocabulary and, for a "
    "NullTokenizer, the end-of-document id training will use.",
)
SAMPLE_COUNTS = ContractCheck(
    "sample_counts",
    "Per stage: train samples = tokens // seq_length; valid and test as Megatron-LM asks; every "
    "blend split draws at least the samples training asks for, and each member is built with at "
    "least the samples the blend draws from it.",
)
EPOCHS = ContractCheck(
    "epochs",
    "Per stage and source: passes over the source's train tokens (samples drawn × seq_length / "
    "tokens) at most max_epochs (run config, default 4).",
    blocking=False,
)
BLEND_ERROR = ContractCheck(
    "blend_error",
    "Per stage and split: every prefix's realized sample count within 1 sample of its target share "
    f"at the end of the blend, and within {BLEND_WINDOW_TOLERANCE:.1%} of it in every full window "
    f"of {BLEND_WINDOW:,} samples.",
)
PLAN_CHECKS = (TOKEN_FILES, SAMPLE_COUNTS, EPOCHS)
INDEX_CHECKS = (BLEND_ERROR,)


@dataclass(frozen=True)
class MemberFigures:
    """One prefix in one split of one stage: what it has and what the blend takes from it."""

    stage: str
    split: str
    source: str
    bucket: str
    dump: str
    prefix: str
    tokens: int  # in the split's documents
    target_share: float  # the blend's normalised weight
    samples_drawn: int  # ceil(N · w): what the blend draws
    samples_built: int  # ceil(ceil(N · w) · 1.005): what its GPTDataset holds
    epochs: float  # samples drawn × seq_length / tokens


def member_figures(stage: StagePlan, known: Mapping[str, np.ndarray] | None = None) -> list[MemberFigures]:
    """Figures of every member of every split of `stage`, from the plan and the `.idx` files
    (document lengths by path from `known` where given: views not written yet)."""
    known = known or {}
    lengths = {m.file.path: known[m.file.path] if m.file.path in known
               else IndexedDatasetReader(Path(m.file.path)).sequence_lengths for m in stage.members}
    figures = []
    for cache in stage_caches(stage):
        for i, member in enumerate(stage.members):
            begin, end = cache.documents[i]
            tokens = int(lengths[member.file.path][begin:end].sum(dtype=np.int64))
            drawn = cache.drawn[i]
            figures.append(MemberFigures(
                stage.name, cache.split, member.file.source, member.file.bucket, member.file.dump,
                member.file.prefix, tokens, cache.blend["weights"][i], drawn,
                cache.members[i]["num_samples"], drawn * stage.seq_length / tokens,
            ))
    return figures


def source_epochs(figures: Sequence[MemberFigures], seq_length: int) -> dict[str, float]:
    """Passes over each source's train tokens."""
    train = [f for f in figures if f.split == "train"]
    epochs = {}
    for source in dict.fromkeys(f.source for f in train):
        mine = [f for f in train if f.source == source]
        epochs[source] = sum(f.samples_drawn for f in mine) * seq_length / sum(f.tokens for f in mine)
    return epochs


def check_token_files(plan: MixturePlan, records: Mapping[str, dict], output_root: Path):
    """TOKEN_FILES against the tokenized generation records (by dump) the plan was read under."""
    recipe = plan.recipe
    identity = recipe.megatron.tokenizer_identity
    training_eod = int(identity["vocab_size"]) if identity.get("class") == NULL_TOKENIZER_CLASS else None
    violations, checked = [], set()
    for member in (m for stage in plan.stages for m in stage.members):
        file = member.file
        if file.prefix in checked:
            continue
        checked.add(file.prefix)
        prefix = token_prefix(output_root, recipe.tokenizer, file.bucket, file.dump)
        where = str(prefix.relative_to(output_root))
        problems = _token_file_problems(records.get(file.dump), prefix, output_root, recipe.tokenizer, training_eod)
        violations += [Violation("token_files", None, 1, problem, where) for problem in problems]
    return TOKEN_FILES.outcome(violations, {"prefixes": len(checked)})


def _token_file_problems(record: dict | None, prefix: Path, output_root: Path, tokenizer: str,
                         training_eod: int | None) -> list[str]:
    if record is None:
        return ["its dump has no published `tokenized` generation (materialize `tokenized` for it)"]
    listed = set(record["files"])
    missing = [str(f.relative_to(output_root)) for f in token_files(prefix)
               if str(f.relative_to(output_root)) not in listed]
    if missing:
        return [f"not in the dump's tokenized generation {record['generation']}: {missing}"]
    written_by = record["contents"]["tokenizer"]
    problems = []
    if written_by["name"] != tokenizer:
        problems.append(f"written by tokenizer {written_by['name']!r}, the recipe reads {tokenizer!r}")
    width = IndexedDatasetReader(prefix).dtype
    if width != optimal_token_dtype(written_by["vocab_size"]):
        problems.append(f"tokens are {width}, not the {optimal_token_dtype(written_by['vocab_size'])} "
                        f"of a {written_by['vocab_size']:,}-token vocabulary")
    if training_eod is not None and written_by["eod_id"] != training_eod:
        problems.append(f"end-of-document id {written_by['eod_id']}, but training's NullTokenizer "
                        f"(vocab_size {training_eod}) uses {training_eod}")
    return problems


def check_sample_counts(plan: MixturePlan):
    megatron = plan.recipe.megatron
    gbs = megatron.global_batch_size
    train_total = sum(stage.num_samples[0] for stage in plan.stages)
    valid = (train_total // gbs // megatron.eval_interval + 1) * megatron.eval_iters * gbs
    expected_eval = (valid, megatron.eval_iters * gbs)
    violations = []
    for stage in plan.stages:
        problems = []
        if stage.num_samples[0] != stage.tokens // stage.seq_length:
            problems.append(f"{stage.num_samples[0]:,} train samples for {stage.tokens:,} tokens of "
                            f"{stage.seq_length} (expected {stage.tokens // stage.seq_length:,})")
        if tuple(stage.num_samples[1:]) != expected_eval:
            problems.append(f"valid/test samples {stage.num_samples[1:]}, Megatron-LM asks {expected_eval}")
        for cache in stage_caches(stage):
            asked = stage.num_samples[SPLITS.index(cache.split)]
            if sum(cache.drawn) < asked:
                problems.append(f"the {cache.split} blend draws {sum(cache.drawn):,} samples, training asks {asked:,}")
            short = [m["dataset_path"] for m, drawn in zip(cache.members, cache.drawn) if m["num_samples"] < drawn]
            if short:
                problems.append(f"{cache.split}: members built with fewer samples than drawn: {short[:3]}")
        violations += [Violation("sample_counts", None, 1, f"stage {stage.name}: {p}", PLAN_FILE) for p in problems]
    figures = {f"train_samples_{stage.name}": stage.num_samples[0] for stage in plan.stages}
    return SAMPLE_COUNTS.outcome(violations, figures)


def check_epochs(plan: MixturePlan, figures: Mapping[str, Sequence[MemberFigures]], max_epochs: float):
    violations, most = [], 0.0
    for stage in plan.stages:
        for source, epochs in source_epochs(figures[stage.name], stage.seq_length).items():
            most = max(most, epochs)
            if epochs > max_epochs:
                violations.append(Violation(
                    "epochs", None, 1,
                    f"stage {stage.name}, source {source}: {epochs:.2f} passes over its train tokens "
                    f"(more than {max_epochs:g}): add data or lower its weight", PLAN_FILE,
                ))
    return EPOCHS.outcome(violations, {"max_epochs_seen": round(most, 4), "max_epochs": max_epochs})


@dataclass(frozen=True)
class BlendError:
    """How far one built blend strays from its target shares."""

    stage: str
    split: str
    size: int
    counts: tuple[int, ...]  # samples drawn from each member
    target_shares: tuple[float, ...]
    end_error: float  # max over members of |drawn − share · size|, in samples
    window_error: float  # max over full windows and members of |share in window − target share|
    windows: int
    blend_file: str  # its dataset_index.npy


def blend_errors(stage: StagePlan, cache_dir: Path) -> list[BlendError]:
    """Measure every split blend of `stage` in `cache_dir` (its dataset_index.npy, memory-mapped)."""
    errors = []
    for cache in stage_caches(stage):
        blend_file = f"{cache.blend_stem}-dataset_index.npy"
        dataset_index = np.load(Path(cache_dir) / blend_file, mmap_mode="r")
        weights = np.asarray(cache.blend["weights"])
        counts = np.bincount(dataset_index, minlength=len(weights))
        windows = len(dataset_index) // BLEND_WINDOW
        worst = 0.0
        for start in range(0, windows, 100):  # 100 windows at a time bounds the memory
            stop = min(windows, start + 100)
            chunk = np.asarray(dataset_index[start * BLEND_WINDOW: stop * BLEND_WINDOW], dtype=np.int64)
            keys = np.repeat(np.arange(stop - start), BLEND_WINDOW) * len(weights) + chunk
            per_window = np.bincount(keys, minlength=(stop - start) * len(weights)).reshape(stop - start, -1)
            worst = max(worst, float(np.abs(per_window / BLEND_WINDOW - weights).max()))
        end_error = float(np.abs(counts - weights * len(dataset_index)).max())
        errors.append(BlendError(stage.name, cache.split, len(dataset_index), tuple(map(int, counts)),
                                 tuple(weights.tolist()), end_error, worst, windows, f"cache/{blend_file}"))
    return errors


def check_blend_error(errors: Sequence[BlendError]):
    violations = []
    for e in errors:
        if e.end_error > BLEND_END_TOLERANCE:
            violations.append(Violation("blend_error", None, 1,
                                        f"stage {e.stage}, {e.split}: a prefix is {e.end_error:.2f} samples "
                                        f"off its target after {e.size:,} samples", e.blend_file))
        if e.window_error > BLEND_WINDOW_TOLERANCE:
            violations.append(Violation("blend_error", None, 1,
                                        f"stage {e.stage}, {e.split}: a prefix's share is {e.window_error:.3%} "
                                        f"off its target in a window of {BLEND_WINDOW:,} samples", e.blend_file))
    figures = {
        "max_end_error_samples": round(max((e.end_error for e in errors), default=0.0), 4),
        "max_window_error_share": round(max((e.window_error for e in errors), default=0.0), 6),
        "full_windows": sum(e.windows for e in errors),
    }
    return BLEND_ERROR.outcome(violations, figures)
