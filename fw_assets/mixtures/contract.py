"""The mixture contract, checked per recipe: the plan's token files, sample counts and epochs, and
what a curriculum reads per source and stage (mixture_plan), and the built blends' error
(megatron_indexes). Plain code, no Dagster; the assets report it through
fw_assets.contracts.asset_checks.ContractReport, with the specs of `fw_assets.mixtures.checks`.
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation
from fw_assets.formats.indexed_dataset import IndexedDatasetReader, optimal_token_dtype
from fw_assets.mixtures.megatron.blended_dataset import CachedBlend
from fw_assets.mixtures.megatron.blended_megatron_dataset_builder import stage_caches
from fw_assets.mixtures.megatron.utils import SPLITS
from fw_assets.mixtures.plan import MixturePlan
from fw_assets.mixtures.recipe import DEFAULT_EPOCH_WARNING, NULL_TOKENIZER_CLASS, Phase
from fw_assets.mixtures.stage_plan import StagePlan
from fw_assets.paths import token_files, token_prefix

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
        dataset_index = CachedBlend(Path(cache_dir) / cache.blend_stem).dataset_index
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


# What a curriculum reads, per source and stage

@dataclass(frozen=True)
class SourceStage:
    """One source in one stage."""

    stage: str
    phase: str
    source: str
    # distinct tokens the stage may read: a view's train documents (min_doc_tokens applied), else its files
    tokens_available: int
    tokens_drawn: int  # train samples the blend draws from it × seq_length
    epochs: float  # tokens drawn / tokens available
    seen_share: float | None  # of the stage's train documents, the share earlier stages listed (fresh documents only)
    repeats: bool  # the stage trains on documents already read (before, or twice in its view)
    unseen_after: int | None  # the source's eligible train documents no stage has listed yet, after this one


MAX_EPOCHS = ContractCheck(
    "max_epochs",
    "Per phase and source: tokens drawn in the phase / tokens available at most the phase's "
    "`max_epochs`, when it sets one.",
)
PHASE_EPOCHS = ContractCheck(
    "phase_epochs",
    f"Per phase without `max_epochs` and source: at most {DEFAULT_EPOCH_WARNING:g} epochs.",
    blocking=False,
)
REPEATS_WHILE_UNSEEN = ContractCheck(
    "repeats_while_unseen",
    "No stage reads documents again while another of its sources still has documents no stage read.",
    blocking=False,
)
CURRICULUM_CHECKS = (MAX_EPOCHS, PHASE_EPOCHS, REPEATS_WHILE_UNSEEN)


def source_stages(plan: MixturePlan) -> list[SourceStage]:
    """Every (stage, source) of the plan, in training order."""
    drawn = _tokens_drawn(plan)
    rows = []
    for stage in plan.stages:
        selections = [s for s in plan.views if s.stage == stage.name]
        for source in plan.recipe.sources:
            mine = [s for s in selections if s.file.source == source.name]
            members = [m for m in stage.members if m.file.source == source.name]
            fresh = mine and plan.recipe.fresh_documents  # else views only reweight whole files
            available = sum(s.eligible_tokens for s in mine) if mine else sum(m.file.tokens for m in members)
            tokens = drawn[stage.name].get(source.name, 0)
            if fresh:
                seen = sum(s.seen_before for s in mine) / max(1, sum(s.train_documents for s in mine))
                repeats, unread = any(s.repeats for s in mine), sum(s.unread_after for s in mine)
            else:  # whole files: every stage shuffles them all again
                seen, repeats, unread = None, tokens > available, None
            rows.append(SourceStage(stage.name, stage.phase, source.name, available, tokens,
                                    tokens / available if available else 0.0, seen, repeats, unread))
    return rows


def _tokens_drawn(plan: MixturePlan) -> dict[str, dict[str, int]]:
    drawn: dict[str, dict[str, int]] = {}
    for stage in plan.stages:
        train = next(c for c in stage_caches(stage) if c.split == "train")
        per_source: dict[str, int] = defaultdict(int)
        for member, samples in zip(stage.members, train.drawn):
            per_source[member.file.source] += samples * stage.seq_length
        drawn[stage.name] = dict(per_source)
    return drawn


def phase_epochs(plan: MixturePlan, rows: list[SourceStage]) -> list[tuple[Phase, str, float]]:
    """(phase, source, tokens drawn in the phase / tokens available) for every phase and source."""
    found = []
    for phase in plan.recipe.phases:
        for source in plan.recipe.sources:
            mine = [r for r in rows if r.phase == phase.name and r.source == source.name]
            available = max(r.tokens_available for r in mine)
            found.append((phase, source.name, sum(r.tokens_drawn for r in mine) / available if available else 0.0))
    return found


def check_max_epochs(plan: MixturePlan, rows: list[SourceStage]) -> CheckOutcome:
    """MAX_EPOCHS: a source read more than its phase's `max_epochs` fails."""
    read = phase_epochs(plan, rows)
    violations = [Violation("max_epochs", None, 1, f"{source} in {phase.name}: {epochs:.2f} epochs > "
                            f"max_epochs {phase.max_epochs:g}: add data or lower its weight", PLAN_FILE)
                  for phase, source, epochs in read if phase.max_epochs is not None and epochs > phase.max_epochs]
    limited = [epochs for phase, _, epochs in read if phase.max_epochs is not None]
    return MAX_EPOCHS.outcome(violations, {"most_epochs_in_a_limited_phase": round(max(limited, default=0.0), 4)})


def check_phase_epochs(plan: MixturePlan, rows: list[SourceStage]) -> CheckOutcome:
    """PHASE_EPOCHS: a warning above 4 epochs of a source in a phase that sets no limit."""
    read = [(phase, source, epochs) for phase, source, epochs in phase_epochs(plan, rows) if phase.max_epochs is None]
    violations = [Violation("phase_epochs", None, 1, f"{source} in {phase.name}: {epochs:.2f} epochs "
                            f"(above {DEFAULT_EPOCH_WARNING:g}; set the phase's max_epochs to allow it)", PLAN_FILE)
                  for phase, source, epochs in read if epochs > DEFAULT_EPOCH_WARNING]
    return PHASE_EPOCHS.outcome(violations, {"most_epochs_in_an_unlimited_phase":
                                             round(max((e for _, _, e in read), default=0.0), 4)})


def check_repeats_while_unseen(rows: list[SourceStage]) -> CheckOutcome:
    """REPEATS_WHILE_UNSEEN: a stage reads documents again while another source of it has
    documents no stage read."""
    violations = []
    for stage in dict.fromkeys(r.stage for r in rows):
        mine = [r for r in rows if r.stage == stage]
        fresh_elsewhere = {r.source: r.unseen_after for r in mine if r.unseen_after}
        for row in mine:
            others = {s: n for s, n in fresh_elsewhere.items() if s != row.source}
            if row.repeats and others:
                unread = ", ".join(f"{s} has {n} unread" for s, n in others.items())
                problem = f"{stage}: {row.source} repeats documents while {unread}"
                violations.append(Violation("repeats_while_unseen", None, 1, problem, PLAN_FILE))
    return REPEATS_WHILE_UNSEEN.outcome(violations, {"stages_repeating": len(violations)})


def curriculum_outcomes(plan: MixturePlan, rows: list[SourceStage]) -> list[CheckOutcome]:
    """The outcomes of CURRICULUM_CHECKS, in their order."""
    return [check_max_epochs(plan, rows), check_phase_epochs(plan, rows), check_repeats_while_unseen(rows)]


# Reweighted sources (`reweight:`)

REWEIGHT_CAP = ContractCheck(
    "reweight_cap",
    "Per reweighted source: every multiplier is in [1, max_multiplier], no document is repeated "
    "more than ⌈max_multiplier⌉ times, and a view without fresh documents lists each train "
    "document exactly its repetitions times.",
)
REWEIGHT_DROPPED = ContractCheck(
    "reweight_dropped",
    "Per reweighted source: exactly floor(drop_top_share × documents) documents, those of highest "
    "loss, are dropped, and no view lists a dropped document.",
)
REWEIGHT_COVERAGE = ContractCheck(
    "reweight_coverage",
    "Per reweighted source: every document of its reweighted token files has a finite probe loss.",
)
REWEIGHT_CHECKS = (REWEIGHT_CAP, REWEIGHT_DROPPED, REWEIGHT_COVERAGE)


def reweight_outcomes(plan: MixturePlan) -> list[CheckOutcome]:
    """The outcomes of REWEIGHT_CHECKS, in their order (passed, with no figures, without `reweight:`)."""
    cap, dropped, coverage = [], [], []
    figures: dict[str, dict] = {"cap": {}, "dropped": {}, "coverage": {}}
    for w in plan.reweighted:
        rule, result, name = w.reweight, w.weighting, w.source
        bound = int(np.ceil(rule.max_multiplier))
        multipliers = result.multipliers_in_place(w.losses.copy())
        if len(multipliers) and not (multipliers.min() >= 1 and multipliers.max() <= rule.max_multiplier
                                     and result.repetitions.max() <= bound):
            over = f"{name}: a multiplier or repetition over the cap {rule.max_multiplier}"
            cap.append(_plan_violation("over_cap", len(multipliers), over))
        del multipliers
        asked = int(np.floor(rule.drop_top_share * w.documents))
        gone = result.dropped
        kept_max = np.max(w.losses, where=~gone, initial=-np.inf)
        if int(gone.sum()) != asked or (asked and np.min(w.losses, where=gone, initial=np.inf) < kept_max):
            dropped.append(_plan_violation(
                "dropped_share", int(result.dropped.sum()),
                f"{name}: {int(result.dropped.sum())} documents dropped, {asked} asked (the highest losses)"))
        for selection in (s for s in plan.views if w.covers(s.file)):
            repetitions = w.repetitions(selection.file)
            trained = np.bincount(selection.documents[:selection.train_documents], minlength=len(repetitions))
            listed = np.bincount(selection.documents, minlength=len(repetitions))
            if (listed[repetitions == 0] > 0).any():
                dropped.append(_plan_violation("dropped_listed", int((listed[repetitions == 0] > 0).sum()),
                                               f"{selection.view.path}: lists dropped documents"))
            whole = not plan.recipe.fresh_documents
            if whole and not np.array_equal(trained[trained > 0], repetitions[trained > 0]):
                unlisted = f"{selection.view.path}: train documents not listed their repetitions times"
                cap.append(_plan_violation("repetitions", 1, unlisted))
        if not np.isfinite(w.losses).all():
            coverage.append(_plan_violation("uncovered", w.documents, f"{name}: documents without a finite loss"))
        figures["cap"][f"repeated_documents_{name}"] = int((result.repetitions > 1).sum())
        figures["dropped"][f"dropped_documents_{name}"] = int(result.dropped.sum())
        figures["coverage"][f"scored_documents_{name}"] = len(w.losses)
    return [REWEIGHT_CAP.outcome(cap, figures["cap"]), REWEIGHT_DROPPED.outcome(dropped, figures["dropped"]),
            REWEIGHT_COVERAGE.outcome(coverage, figures["coverage"])]


def _plan_violation(kind: str, rows: int, problem: str) -> Violation:
    return Violation(kind, None, rows, problem, PLAN_FILE)
