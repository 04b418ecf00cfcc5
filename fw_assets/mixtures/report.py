"""What a planned and built mixture looks like to a person: `report.md` (with a curriculum's
sources over training and the reweighted sources), `shares.png`, `losses-<source>.png`, `blend.md`
and the markdown tables of the assets' metadata.
Plain code, no Dagster."""

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from fw_assets.contracts.findings import CheckOutcome
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.lib.markdown import literal, table
from fw_assets.mixtures.contract import BlendError, MemberFigures, SourceStage, source_epochs
from fw_assets.mixtures.plan import MixturePlan
from fw_assets.mixtures.reweighted import SourceReweighting, highest_losses, tie_warning
from fw_assets.mixtures.stage_plan import StagePlan


def megatron_args_text(stage: StagePlan) -> str:
    """The stage's training flags, one per line, ready to paste after `pretrain_gpt.py`."""
    pairs, args, i = [], list(stage.megatron_args), 0
    while i < len(args):
        takes_value = i + 1 < len(args) and not args[i + 1].startswith("--")
        pairs.append(" ".join(shlex.quote(a) for a in args[i: i + 1 + takes_value]))
        i += 1 + takes_value
    return " \\\n    ".join(pairs)


def megatron_args_block(stage: StagePlan) -> str:
    """The flags as a markdown code block."""
    return f"```\n{megatron_args_text(stage)}\n```"


def stage_table(stages: Sequence[StagePlan]) -> str:
    """One row per stage: tokens, seq_length, samples per split, members; the demo prints it."""
    rows = [(s.phase, s.name, s.tokens, s.seq_length, s.temperature, *s.num_samples, len(s.members))
            for s in stages]
    return table(["phase", "stage", "tokens", "seq_length", "temperature", "train samples",
                  "valid samples", "test samples", "prefixes"], rows)


def source_table(stage: StagePlan, figures: Sequence[MemberFigures]) -> str:
    """Per source, train split: files, the tokens of their train split as the blend reads them (a
    reweighted document once per repetition), target share, samples drawn, epochs."""
    train = [f for f in figures if f.split == "train"]
    epochs = source_epochs(figures, stage.seq_length)
    rows = []
    for source, share in stage.shares.items():
        mine = [f for f in train if f.source == source]
        rows.append((source, len(mine), sum(f.tokens for f in mine), share,
                     sum(f.samples_drawn for f in mine), epochs.get(source, 0.0)))
    return table(
        ["source", "prefixes", "train-split tokens (repeats counted)", "target share", "samples drawn", "epochs"], rows
    )


def prefix_table(figures: Sequence[MemberFigures]) -> str:
    """Per prefix and split: the split's tokens, target share, samples drawn and built, epochs."""
    rows = [(f.split, f.source, f.bucket, f.dump, f.tokens, f.target_share, f.samples_drawn,
             f.samples_built, f.epochs) for f in figures]
    return table(["split", "source", "bucket", "dump", "tokens in the split", "target share",
                  "samples drawn", "samples built", "epochs"], rows)


def plan_report(plan: MixturePlan, figures: Mapping[str, Sequence[MemberFigures]]) -> str:
    """report.md: the stages, then per stage its flags, sources and prefixes."""
    lines = [f"# Mixture {plan.recipe.name}", "",
             f"Recipe `{plan.recipe.path}`, plan fingerprint `{plan.fingerprint}`, "
             f"token files of `{plan.recipe.tokenizer}`; cache `{plan.cache_dir}`.", "",
             stage_table(plan.stages), ""]
    for stage in plan.stages:
        lines += [f"## Stage {stage.name}", "", "Megatron-LM flags:", "", megatron_args_block(stage), "",
                  "### Sources (train split)", "", source_table(stage, figures[stage.name]), "",
                  "### Prefixes", "", prefix_table(figures[stage.name]), ""]
    return "\n".join(lines)


def blend_table(stage: StagePlan, errors: Sequence[BlendError]) -> str:
    """Per split and prefix of a built stage: samples drawn, realized and target share."""
    rows = []
    for e in errors:
        for member, drawn, target in zip(stage.members, e.counts, e.target_shares):
            rows.append((e.split, member.file.source, member.file.bucket, member.file.dump, drawn,
                         drawn / e.size, target, drawn / e.size - target))
    return table(["split", "source", "bucket", "dump", "samples drawn", "realized share",
                  "target share", "difference"], rows)


def blend_report(recipe: str, stages: Sequence[StagePlan], errors: Mapping[str, Sequence[BlendError]]) -> str:
    """blend.md: per stage the blend error figures and every prefix's realized vs target share."""
    lines = [f"# Built blends of mixture {recipe}", ""]
    for stage in stages:
        summary = [(e.split, e.size, e.end_error, e.window_error, e.windows) for e in errors[stage.name]]
        lines += [f"## Stage {stage.name}", "",
                  table(["split", "samples", "max end error (samples)", "max window error (share)",
                         "full windows"], summary), "",
                  blend_table(stage, errors[stage.name]), ""]
    return "\n".join(lines)


def freshness_markdown(rows: list[SourceStage], outcomes: list[CheckOutcome]) -> str:
    """The report's per-source section (tokens drawn against the distinct tokens the stage may read:
    each document once, a view's train documents or a whole file's documents) and the checks'
    outcomes."""
    lines = ["| stage | source | distinct tokens it may read | tokens drawn | epochs | seen before | unread after |",
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
        axes.text((start + end) / 2, 1.02, f"{phase.name}\nseq {phase.seq_length}",
                  ha="center", va="bottom", fontsize=8)
        start = end
    axes.set(xlim=(0, bounds[-1]), ylim=(0, 1), xlabel="training tokens", ylabel="share of samples")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return Path(path)


def reweighting_markdown(plan: MixturePlan, rows: Sequence[SourceStage], starts: Mapping[str, str],
                         pictures: Mapping[str, str]) -> str:
    """Per reweighted source: its rule, the loss histogram (`pictures`: source -> image link), the
    multiplier distribution, documents repeated and tokens added, the dropped share with the text
    starts of the ten highest-loss documents, and each stage's effective epochs."""
    lines = []
    for w in plan.reweighted:
        rule, result = w.reweight, w.weighting
        lines += [f"### Reweighted source {w.source}", "",
                  f"Probe `{rule.probe}`, buckets {', '.join(rule.buckets)}: {w.documents:,} documents, typical "
                  f"(median) loss {result.typical_loss:.3f} nats/token; multiplier = loss / typical, clipped to "
                  f"[1, {rule.max_multiplier:g}]; the top {rule.drop_top_share:.1%} by loss dropped.", "",
                  *([f"**Warning:** {warning}.", ""] if (warning := tie_warning(w)) else []),
                  f"![losses of {w.source}]({pictures[w.source]})", "",
                  table(["", "documents", "share", "tokens", "mean loss"], [
                      _group_row("dropped (highest loss)", w, result.dropped),
                      _group_row("repeated", w, result.repetitions > 1),
                      _group_row("listed once", w, result.repetitions == 1)]), "",
                  f"Tokens added by repetitions: {_added_tokens(w):,} "
                  "(each repetition beyond the first, whole documents).", "",
                  "Multiplier distribution:", "",
                  _multiplier_table(result.multipliers_in_place(w.losses[~result.dropped]), result.repetitions), "",
                  "The ten highest-loss documents (first 200 characters):", "",
                  table(["id", "bucket", "dump", "loss", "dropped", "text"],
                        [(i, b, d, round(loss, 3), "yes" if gone else "no", _cell(starts.get(i)))
                         for i, b, d, loss, gone in highest_losses(w)]), "",
                  "Effective epochs (tokens drawn / the distinct tokens it may read):", "",
                  table(["stage", "tokens drawn", "distinct tokens", "effective epochs"],
                        [(r.stage, r.tokens_drawn, distinct, r.tokens_drawn / max(distinct, 1))
                         for r in rows if r.source == w.source
                         for distinct in [_distinct_tokens(plan, w, r.stage)]]), ""]
    return "\n".join(lines)


def _group_row(label: str, weighting: SourceReweighting, chosen: np.ndarray) -> tuple:
    """(label, documents, share, tokens, mean loss) of the documents `chosen` (a mask) selects."""
    tokens = sum(int(lengths[chosen[part]].sum()) for part, lengths in _file_lengths(weighting))
    return label, int(chosen.sum()), _share(chosen), tokens, _mean(weighting.losses[chosen])


def _added_tokens(weighting: SourceReweighting) -> int:
    """Tokens listed beyond each document's first listing: (repetitions - 1) x its tokens, summed."""
    added = 0
    for part, lengths in _file_lengths(weighting):
        repetitions = weighting.weighting.repetitions[part].astype(np.int64)
        added += int(((repetitions - 1) * lengths)[repetitions > 1].sum())
    return added


def _file_lengths(weighting: SourceReweighting):
    """(the file's part of the source's arrays, its documents' tokens) of each reweighted file,
    read from its index one file at a time."""
    for file, start in zip(weighting.files, weighting.starts):
        yield slice(start, start + file.documents), IndexedDatasetReader(Path(file.path)).sequence_lengths


def _distinct_tokens(plan: MixturePlan, weighting: SourceReweighting, stage: str) -> int:
    """The train tokens a stage may read of a reweighted source, each document counted once."""
    views = [s for s in plan.views if s.stage == stage and weighting.covers(s.file)]
    plain = [m.file for m in plan.stage(stage).members
             if m.file.source == weighting.source and m.file.path not in {s.view.path for s in views}]
    return sum(s.eligible_tokens for s in views) + sum(f.tokens for f in plain)


def _share(mask: np.ndarray) -> float:
    return float(mask.mean()) if mask.size else 0.0


def _mean(values: np.ndarray) -> float:
    return round(float(values.mean()), 3) if len(values) else 0.0


def _multiplier_table(multipliers: np.ndarray, repetitions: np.ndarray) -> str:
    """`multipliers`: a scratch array (the quantiles partition it in place)."""
    quantiles = (
        np.quantile(multipliers, [0.0, 0.5, 0.9, 0.99, 1.0], overwrite_input=True) if len(multipliers) else np.zeros(5)
    )
    rows = [("multiplier " + q, round(float(v), 3)) for q, v in zip(("min", "median", "p90", "p99", "max"), quantiles)]
    rows += [(f"listed {n}×", int(c)) for n, c in enumerate(np.bincount(repetitions)) if c]
    return table(["", "value"], rows)


def _cell(text: str | None) -> str:
    return "(text not published)" if text is None else literal(text)


def plot_losses(weighting: SourceReweighting, path: Path) -> Path:
    """PNG: the histogram of a reweighted source's losses, kept and dropped, with the typical loss,
    where the cap is reached and where the drop begins."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    result, losses = weighting.weighting, weighting.losses
    figure, axes = pyplot.subplots(figsize=(9, 4))
    bins = np.histogram_bin_edges(losses, bins=60) if len(losses) else 10
    axes.hist([losses[~result.dropped], losses[result.dropped]], bins=bins, stacked=True,
              label=["kept", "dropped"], color=["tab:blue", "tab:red"])
    typical = result.typical_loss
    axes.axvline(typical, color="black", linestyle="--", label=f"typical {typical:.2f} (multiplier 1)")
    axes.axvline(typical * weighting.reweight.max_multiplier, color="tab:green", linestyle=":",
                 label=f"cap ×{weighting.reweight.max_multiplier:g} reached")
    axes.set(xlabel="probe loss (nats per token)", ylabel="documents", yscale="log",
             title=f"source {weighting.source}: probe {weighting.reweight.probe}")
    axes.legend(fontsize=8)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return Path(path)
