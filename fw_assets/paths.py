"""Every path fw_assets reads or writes. The published layout is the users' interface (Megatron's
`--data-path` takes the token prefixes), so it is spelled here and nowhere else.

    <source_root>/data/<dump>/*.parquet                    the FineWeb-Edu snapshot (read only)
    <source_root>/planted/<dump>.parquet                   generated dumps only: planted copies' ground truth
    <source_root>/planted/<dump>.probe.parquet             generated dumps only: probe plants' ground truth
    <output_root>/selection/<dump>.parquet                 sampled: every row's decision
    <output_root>/en/<bucket>/<dump>/*.parquet             bucketed (the seed's layout)
    <output_root>/minhash/<dump>.parquet                   minhash: band keys and text starts
    <output_root>/minhash/<dump>.signatures.arrow          minhash: ids and b-bit signatures
    <output_root>/minhash/<dump>.keys.arrow                minhash: the band keys sorted by key
    <output_root>/dedup/<dump>.parquet                     deduplicated: every id's decision
    <output_root>/tokenized/<tokenizer>/<bucket>/<dump>    tokenized: .bin, .idx, .docs.parquet
    <output_root>/probe/<probe>/<bucket>/<dump>.parquet    probe_loss: each kept document's loss
    <output_root>/mixtures/<recipe>/                       plan.json, <stage>.data-args.txt, report.md,
                                                           cache/, blend.md, shares.png,
                                                           views/<stage>/<bucket>/<dump>, packed/<stage>/
    <output_root>/published/<name>.json                    each output's generation record
    <output_root>/.staging/                                staging folders, locks, slots, DuckDB spill

Nothing here touches the disk except `bucketed_files` and `decision_files`, which list what
is there.
"""

import re
from pathlib import Path

from fw_assets.sampling_policy import SamplingPolicy

# A name given by a user (recipe, source, phase, tokenizer, probe) becomes folder and file names,
# e.g. `.staging/locks/probe_loss-<name>-<dump>.write.lock`: one strict pattern, and short enough
# that every file named after it stays under the 255 bytes a file name may hold (the longest adds
# about 40 characters to it).
# Names are matched whole (`fullmatch`: `$` would let a trailing newline through) and in ASCII.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*", re.ASCII)
MAX_NAME_LENGTH = 100
NAME_RULE = (f"must match {NAME_PATTERN.pattern}, hold no '..' and be at most {MAX_NAME_LENGTH} characters "
             "(it becomes a path; no path is built from another name)")
# A dump: a Common Crawl crawl's name, a partition key and a folder name.
DUMP_NAME_PATTERN = re.compile(r"CC-MAIN-([0-9]{4})-([0-9]{2})", re.ASCII)  # groups: year, week


def is_safe_name(name: str) -> bool:
    """True when `name` may become a folder or file name (NAME_RULE)."""
    return NAME_PATTERN.fullmatch(name) is not None and ".." not in name and len(name) <= MAX_NAME_LENGTH


def is_dump_name(name: str) -> bool:
    """True when `name` is a whole dump name, `CC-MAIN-YYYY-WW` in ASCII digits."""
    return DUMP_NAME_PATTERN.fullmatch(name) is not None


def source_data_dir(source_root: Path) -> Path:
    """The folder of a snapshot holding one folder per dump."""
    return source_root / "data"


def source_dump_dir(source_root: Path, dump: str) -> Path:
    return source_data_dir(source_root) / dump


def planted_truth_path(source_root: Path, dump: str) -> Path:
    """Which ids of a generated dump copy which template: beside `data/`, never read as a dump."""
    return source_root / "planted" / f"{dump}.parquet"


def planted_probe_truth_path(source_root: Path, dump: str) -> Path:
    """Which ids of a generated dump are probe plants (gibberish, contract), when it has them."""
    return source_root / "planted" / f"{dump}.probe.parquet"


def staging_root(output_root: Path) -> Path:
    """Staging folders live on the outputs' filesystem, so publishing is a rename."""
    return output_root / ".staging"


def publish_locks_dir(output_root: Path) -> Path:
    return staging_root(output_root) / "locks"


def machine_slots_dir(output_root: Path, host: str) -> Path:
    """The lock files of one machine's slots for heavy steps (fw_assets.lib.slots)."""
    return staging_root(output_root) / "slots" / host


def publication_name(step: str, *keys: str) -> str:
    """The name an output is published under (its lock, staging folder and generation record):
    `bucketed-CC-MAIN-2013-20`, `tokenized-<tokenizer>-<dump>`, `mixture_plan-<recipe>`."""
    return "-".join((step, *keys))


# The steps published per recipe (`mixture_plan-<recipe>`); every other step per dump, its name ending
# with the dump (`tokenized-<tokenizer>-CC-MAIN-2013-20`).
RECIPE_STEPS = ("mixture_plan", "megatron_indexes", "packed")
DUMP_AT_END = re.compile(r"-(CC-MAIN-[0-9]{4}-[0-9]{2})\Z")


def publication_partition(name: str) -> str:
    """The partition (dump or recipe) of the publication named `name`, as `publication_name` spelled it."""
    step, _, rest = name.partition("-")
    found = None if step in RECIPE_STEPS else DUMP_AT_END.search(name)
    return found.group(1) if found else rest


def generation_record_path(output_root: Path, name: str) -> Path:
    """The generation record of publication `name` (e.g. `published/bucketed-CC-MAIN-2013-20.json`)."""
    return output_root / "published" / f"{name}.json"


def spill_dir(output_root: Path) -> Path:
    """Where DuckDB spills when a step's data outgrows its memory limit."""
    return staging_root(output_root) / "duckdb-spill"


def selection_path(output_root: Path, dump: str) -> Path:
    """The sampled step's decision for every row of the dump (no text)."""
    return output_root / "selection" / f"{dump}.parquet"


def bucket_dump_dir(output_root: Path, bucket: str, dump: str) -> Path:
    """The seed's published layout: `en/<bucket>/<dump>/`."""
    return output_root / "en" / bucket / dump


def bucket_dump_dirs(output_root: Path, dump: str, policy: SamplingPolicy) -> dict[str, Path]:
    return {b.name: bucket_dump_dir(output_root, b.name, dump) for b in policy.buckets}


def bucketed_files(output_root: Path, dump: str, policy: SamplingPolicy) -> dict[str, list[Path]]:
    """The published parquet files of a dump, per bucket, in name order."""
    return {
        bucket: sorted(folder.glob("*.parquet"))
        for bucket, folder in bucket_dump_dirs(output_root, dump, policy).items()
    }


def recorded_bucket_files(output_root: Path, record: dict) -> dict[str, tuple[int, list[Path]]]:
    """Each bucket's rows and published files, as a generation record of bucketed says (a bucket
    without rows is listed with 0: empty, not missing)."""
    return {
        bucket: (entry["rows"], [output_root / f for f in entry["files"]])
        for bucket, entry in record["contents"]["buckets"].items()
    }


def minhash_path(output_root: Path, dump: str) -> Path:
    """Each bucketed document's LSH band keys (fw_assets.dedup.signature_files)."""
    return output_root / "minhash" / f"{dump}.parquet"


def signatures_path(minhash: Path) -> Path:
    """The ids and b-bit signatures of a minhash file's documents, row for row, beside it."""
    return minhash.with_name(minhash.name.removesuffix(".parquet") + ".signatures.arrow")


def sorted_keys_path(minhash: Path) -> Path:
    """The band keys of a minhash file sorted by key, beside it (fw_assets.dedup.sorted_keys)."""
    return minhash.with_name(minhash.name.removesuffix(".parquet") + ".keys.arrow")


def minhash_files(minhash: Path) -> tuple[Path, Path, Path]:
    """A minhash file and the two files beside it that are published with it."""
    return minhash, signatures_path(minhash), sorted_keys_path(minhash)


def dedup_path(output_root: Path, dump: str) -> Path:
    """One near-duplicate decision per bucketed id of the dump (fw_assets.dedup.decide)."""
    return output_root / "dedup" / f"{dump}.parquet"


def decision_files(output_root: Path) -> dict[str, Path]:
    """Every dump with a decision file on disk (`dedup/<dump>.parquet`), by dump, in name order;
    whether each is published (has its generation record) is for the reader to check."""
    return {path.stem: path for path in sorted(dedup_path(output_root, "").parent.glob("*.parquet"))}


def tokenized_root(output_root: Path) -> Path:
    return output_root / "tokenized"


def tokenizer_dir(output_root: Path, tokenizer_name: str) -> Path:
    """Every token file one tokenizer wrote; the folder is named by the tokenizer's identity."""
    return tokenized_root(output_root) / tokenizer_name


def token_prefix(output_root: Path, tokenizer_name: str, bucket: str, dump: str) -> Path:
    """The Megatron data prefix of one (tokenizer, bucket, dump): `.../<bucket>/<dump>`."""
    return tokenizer_dir(output_root, tokenizer_name) / bucket / dump


# Suffixes are appended, never swapped: prefixes like `CC-MAIN-2024-10` or `2.8/x` hold dots.
def bin_path(prefix: Path) -> Path:
    """`<prefix>.bin`: the tokens."""
    return Path(f"{prefix}.bin")


def idx_path(prefix: Path) -> Path:
    """`<prefix>.idx`: Megatron's index of the tokens."""
    return Path(f"{prefix}.idx")


def docs_path(prefix: Path) -> Path:
    """`<prefix>.docs.parquet`: document index -> source id."""
    return Path(f"{prefix}.docs.parquet")


def token_files(prefix: Path) -> list[Path]:
    """The files of one token output, all published together: `.bin`, `.idx`, `.docs.parquet`."""
    return [bin_path(prefix), idx_path(prefix), docs_path(prefix)]


def probe_root(output_root: Path) -> Path:
    return output_root / "probe"


def probe_dir(output_root: Path, probe: str) -> Path:
    """Every loss one probe computed; the folder is named by the probe (a checked name)."""
    return probe_root(output_root) / probe


def probe_loss_path(output_root: Path, probe: str, bucket: str, dump: str) -> Path:
    """One probe's losses of one bucket of one dump, row i = document i of its token files."""
    return probe_dir(output_root, probe) / bucket / f"{dump}.parquet"


def shipped_recipes_dir() -> Path:
    """The example mixture recipes that ship with fw_assets (`fw_assets/mixtures/*.yaml`)."""
    return Path(__file__).parent / "mixtures"


def mixture_dir(output_root: Path, recipe: str) -> Path:
    """One recipe's outputs; also where training finds them, under the recipe's `data_root`."""
    return output_root / "mixtures" / recipe


def plan_path(output_root: Path, recipe: str) -> Path:
    return mixture_dir(output_root, recipe) / "plan.json"


def data_args_path(output_root: Path, recipe: str, stage: str) -> Path:
    """A stage's `--data-args-path` file: `w1 prefix1 w2 prefix2 …`."""
    return mixture_dir(output_root, recipe) / f"{stage}.data-args.txt"


def mixture_cache_dir(output_root: Path, recipe: str) -> Path:
    """`--data-cache-path`: Megatron's flat cache folder, shared by the recipe's stages."""
    return mixture_dir(output_root, recipe) / "cache"


def shares_picture_path(output_root: Path, recipe: str) -> Path:
    """The PNG beside the plan: each source's share over training tokens, phases, context lengths."""
    return mixture_dir(output_root, recipe) / "shares.png"


def loss_picture_path(output_root: Path, recipe: str, source: str) -> Path:
    """The PNG beside the plan of a reweighted source: its documents' probe losses, the cap and the cut."""
    return mixture_dir(output_root, recipe) / f"losses-{source}.png"


def views_dir(output_root: Path, recipe: str) -> Path:
    """Every stage's views of the token files (fresh documents), published together."""
    return mixture_dir(output_root, recipe) / "views"


def view_prefix(output_root: Path, recipe: str, stage: str, bucket: str, dump: str) -> Path:
    """A stage's view of one token file: its own `.idx` and `.docs.parquet` listing some of the
    file's documents, and `.bin` a hard link to the file's (the prefix still ends in `<bucket>/<dump>`)."""
    return views_dir(output_root, recipe) / stage / bucket / dump


def packed_root(output_root: Path, recipe: str) -> Path:
    """Every stage's packed samples (`export: packed`), published together."""
    return mixture_dir(output_root, recipe) / "packed"


def packed_dir(output_root: Path, recipe: str, stage: str) -> Path:
    """A stage's training samples as parquet rows, `part-*.parquet` in sample order."""
    return packed_root(output_root, recipe) / stage


def report_path(output_root: Path, recipe: str) -> Path:
    """The plan's report: per source and prefix, tokens, samples, epochs, shares; the flags."""
    return mixture_dir(output_root, recipe) / "report.md"


def blend_report_path(output_root: Path, recipe: str) -> Path:
    """The built blends' realized shares beside their targets, published with `cache/`."""
    return mixture_dir(output_root, recipe) / "blend.md"
