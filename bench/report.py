"""The results table and the targets each case is held to (speed against datatrove, the floors
and tiktoken), as markdown."""

import statistics
from dataclasses import dataclass

from bench.measure import Measurement
from bench.suite import Case
from bench.texts import MULTISCRIPT, TEXT_KINDS

MB = 1e6
GIB = 2**30


@dataclass
class Result:
    case: Case
    runs: list[Measurement]

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def cpu_seconds(self) -> float:
        return statistics.median(r.cpu_seconds for r in self.runs)

    @property
    def peak_rss(self) -> int:
        return max(r.peak_rss for r in self.runs)

    @property
    def docs_per_second(self) -> float:
        return self.case.documents / self.seconds

    @property
    def tokens_per_second(self) -> float | None:
        if self.case.tokens is None:
            return None
        return statistics.median(self.case.tokens(r) / r.seconds for r in self.runs)


def _spread(result: Result) -> str:
    times = sorted(r.seconds for r in result.runs)
    return f"{result.seconds:,.1f} ({times[0]:,.1f}–{times[-1]:,.1f})" if len(times) > 1 else f"{times[0]:,.1f}"


def results_table(results: list[Result]) -> str:
    lines = [
        "| case | docs in | s, median (min–max) | CPU s | docs/s | text MB/s | tokens/s | peak RSS GiB |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        tokens = r.tokens_per_second
        lines.append(
            f"| {r.case.label} | {r.case.documents:,} | {_spread(r)} | {r.cpu_seconds:,.1f} "
            f"| {r.docs_per_second:,.0f} | {r.case.text_bytes / MB / r.seconds:,.1f} "
            f"| {'' if tokens is None else f'{tokens:,.0f}'} | {r.peak_rss / GIB:.2f} |"
        )
    return "\n".join(lines)


@dataclass
class Target:
    what: str
    measured: float
    limit: float
    at_least: bool  # True: measured >= limit passes; False: measured <= limit passes
    cpu_ratio: float | None = None  # the same ratio in CPU seconds: less sensitive to other load

    @property
    def met(self) -> bool:
        return self.measured >= self.limit if self.at_least else self.measured <= self.limit


# `tokenized`'s target: ≥ 4 × ideal tiktoken on prose, and never slower on text that defeats caches.
TOKENIZED_SPEEDUP_NEEDED = {MULTISCRIPT: 1.0}
TOKENIZED_SPEEDUP_ON_PROSE = 4.0


def targets(by_name: dict[str, Result], cores: int, memory_limit_bytes: int, texts: str) -> list[Target]:
    """The targets the cases in `by_name` measure, on a dump of `texts` (bench/texts.py)."""
    found = []

    def have(*names: str) -> bool:
        return all(n in by_name for n in names)

    for fw in ("fw_dagster", "fw_sql"):
        if have(fw, "datatrove"):
            found.append(_ratio(f"{fw} documents/s ÷ datatrove's", by_name["datatrove"], by_name[fw], 2.5, True))
        for floor in ("floor", "floor_partitioned"):
            if have(fw, floor):
                found.append(_ratio(f"{fw} time ÷ {floor} time", by_name[fw], by_name[floor], 1.1, False))
    # ideal tiktoken: one tiktoken process's tokens/s × the cores
    speedup = TOKENIZED_SPEEDUP_NEEDED.get(texts, TOKENIZED_SPEEDUP_ON_PROSE)
    for step, limit in (("tokenized", speedup), ("tokenized_tiktoken", 0.8)):
        if have(step, "tiktoken_1"):
            single = by_name["tiktoken_1"].tokens_per_second
            found.append(Target(
                f"{step} tokens/s ÷ (tiktoken 1 process × {cores} cores)",
                by_name[step].tokens_per_second / (single * cores), limit, True,
            ))
    if have("tokenized", "tokenized_tiktoken"):
        found.append(Target(
            "tokenized peak RSS ÷ the same with tiktoken alone (the fast backend's cache)",
            by_name["tokenized"].peak_rss / by_name["tokenized_tiktoken"].peak_rss, 1.1, False,
        ))
    for texts in TEXT_KINDS:
        for encoder in ("fastokens", "tiktoken_batch"):
            if have(f"encoder_{encoder}_{texts}", f"encoder_tiktoken_{texts}"):
                found.append(_encoder_speedup(by_name, encoder, texts))
    if have("tiktoken_1", f"tiktoken_{cores}") and cores > 1:
        found.append(Target(
            f"tiktoken loop, {cores} processes ÷ (1 process × {cores} cores), for reference",
            by_name[f"tiktoken_{cores}"].tokens_per_second / (by_name["tiktoken_1"].tokens_per_second * cores),
            0.0, True,
        ))
    at_n = {"sampled": "sampled_N_default", "bucketed": "bucketed_N_default", "tokenized": "tokenized"}
    for step in ("sampled", "bucketed", "tokenized"):
        if have(at_n[step], f"{step}_4N_default"):
            n, n4 = by_name[at_n[step]], by_name[f"{step}_4N_default"]
            found.append(Target(f"{step}: peak RSS at 4N ÷ at N", n4.peak_rss / n.peak_rss, 1.2, False))
            found.append(Target(
                f"{step}: peak RSS at 4N ÷ the default memory limit", n4.peak_rss / memory_limit_bytes, 1.0, False
            ))
        for size in ("N", "4N"):
            if have(f"{step}_{size}_default", f"{step}_{size}_duckdb"):
                found.append(_ratio(
                    f"{step} at {size}: time with the default limit ÷ with DuckDB's own (80 % of RAM)",
                    by_name[f"{step}_{size}_default"], by_name[f"{step}_{size}_duckdb"], 1.2, False,
                ))
    return found


def _encoder_speedup(by_name: dict[str, Result], encoder: str, texts: str) -> Target:
    """tiktoken's encoding CPU seconds ÷ `encoder`'s (the batch: wall seconds, its threads' CPU
    would understate what it costs), medians of the runs, encoding alone."""
    def median(name: str, fact: str) -> float:
        values = sorted(run.facts[fact] for run in by_name[name].runs)
        return values[len(values) // 2]

    reference = median(f"encoder_tiktoken_{texts}", "encode_cpu_seconds")
    fact = "encode_seconds" if encoder.endswith("batch") else "encode_cpu_seconds"
    threads = " (wall, its threads)" if fact == "encode_seconds" else ""
    return Target(
        f"{encoder} on {texts}: speed ÷ tiktoken's, 1 thread{threads}",
        reference / max(median(f"encoder_{encoder}_{texts}", fact), 1e-9), 0.0, True,
    )


def _ratio(what: str, a: Result, b: Result, limit: float, at_least: bool) -> Target:
    """a's median time ÷ b's, also in CPU seconds."""
    return Target(what, a.seconds / b.seconds, limit, at_least, a.cpu_seconds / b.cpu_seconds)


def targets_table(found: list[Target]) -> str:
    lines = ["| target | measured | same in CPU s | needed | met |", "|---|--:|--:|--:|:-:|"]
    for t in found:
        need = f"{'≥' if t.at_least else '≤'} {t.limit:g}" if t.limit else ""
        met = ("yes" if t.met else "**no**") if t.limit else ""
        cpu = "" if t.cpu_ratio is None else f"{t.cpu_ratio:.2f}"
        lines.append(f"| {t.what} | {t.measured:.2f} | {cpu} | {need} | {met} |")
    return "\n".join(lines)
