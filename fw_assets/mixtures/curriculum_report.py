"""What a curriculum reads, per source and stage: tokens available, tokens drawn, epochs, and how
many of a stage's documents earlier stages already read; the checks on it; a markdown section
and a picture of the sources' shares over training.

Plain functions over a `MixturePlan`; `mixture_plan` writes their results and reports each
`CheckOutcome` (fw_assets.contracts.findings) as a per-recipe asset check.
"""

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation
from fw_assets.mixtures.cache import stage_caches
from fw_assets.mixtures.contract import PLAN_FILE
from fw_assets.mixtures.plan import MixturePlan
from fw_assets.mixtures.recipe import DEFAULT_EPOCH_WARNING, Phase


@dataclass(frozen=True)
class SourceStage:
    """One source in one stage."""

    stage: str
    phase: str
    source: str
    tokens_available: int  # the source's train tokens the stage may read (min_doc_tokens applied)
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
            available = sum(s.eligible_tokens for s in mine) if mine else sum(m.file.tokens for m in members)
            tokens = drawn[stage.name].get(source.name, 0)
            if mine:
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


def freshness_markdown(rows: list[SourceStage], outcomes: list[CheckOutcome]) -> str:
    """The report's per-source section and the checks' outcomes."""
    lines = ["| stage | source | tokens available | tokens drawn | epochs | seen before | unread after |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        seen = "n/a" if r.seen_share is None else f"{r.seen_share:.1%}"
        unseen = "n/a" if r.unseen_after is None else f"{r.unseen_after:,}"
        lines.append(f"| {r.stage} | {r.source} | {r.tokens_available:,} | {r.tokens_drawn:,} | "
                     f"{r.epochs:.3f} | {seen} | {unseen} |")
    lines.append("")
    for o in outcomes:
        verdict = "passed" if o.passed else "FAILED" if o.check.blocking else "WARNING"
        lines.append(f"- {o.check.name}: {verdict}" + "".join(f"\n  - {v.problem}" for v in o.violations))
    return "\n".join(lines) + "\n"


def plot_shares(plan: MixturePlan, path: Path) -> Path:
    """PNG: each source's share of the samples over training tokens (stacked, one step per
    stage), phase boundaries and each phase's context length."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    sources = [s.name for s in plan.recipe.sources]
    bounds = np.cumsum([0] + [stage.tokens for stage in plan.stages])
    shares = np.array([[stage.shares[s] for stage in plan.stages] for s in sources])
    figure, axes = pyplot.subplots(figsize=(9, 4.5))
    axes.stackplot(bounds, np.concatenate([shares, shares[:, -1:]], axis=1), labels=sources, step="post")
    start = 0
    for phase in plan.recipe.phases:
        end = start + phase.tokens
        axes.axvline(end, color="black", linewidth=1)
        axes.text((start + end) / 2, 1.02, f"{phase.name}\nseq {phase.seq_length}", ha="center", va="bottom", fontsize=8)
        start = end
    axes.set(xlim=(0, bounds[-1]), ylim=(0, 1), xlabel="training tokens", ylabel="share of samples")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return Path(path)
