"""Generate FineWeb-Edu-shaped sample dumps: `ROOT/data/<dump>/train-NNNNN-of-MMMMM.parquet`.

Every value comes from numpy generators keyed on (seed, dump, row), so the same arguments give
byte-identical files. Rows are produced and written one row group at a time (bounded memory),
and each file is written under a temporary name and renamed into place.

A share of rows (`dup_share`) are near-duplicates: row r of any dump is, when chosen, a lightly
edited copy of "template" r, whose text, url and score depend only on (seed, r). The same rows
are chosen in every dump, so a later dump holds near-copies of an earlier dump's documents.
Another share (`twin_share`) are twins within a dump: both rows of a chosen pair (2m, 2m + 1)
are edited copies of template 2m, again in every dump. Copies of one template have a word
5-gram Jaccard of about 0.8-0.9 (fewer for very short documents). Which id copies which template
is written beside the data, in `ROOT/planted/<dump>.parquet` (`id`, `template`): the ground truth
for deduplication tests. Optionally (`paragraph_share`, 0 by default) other rows become short pages
sharing one of a few boilerplate paragraphs: not copies, but close enough (word 5-gram Jaccard
about 0.3-0.7) to tempt a MinHash-LSH without verification. Optionally (`probe_plant_share`, 0 by
default) rows become top-bucket gibberish or contract pages for the probe demo
(fw_assets.synthetic.probe_plants).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.paths import DUMP_NAME_PATTERN, planted_probe_truth_path, planted_truth_path, source_dump_dir
from fw_assets.synthetic import probe_plants

DEFAULT_DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48")
DEFAULT_ROWS = 5_000
ROW_GROUP_SIZE = 1_000  # like `datasets.push_to_hub`
DEFAULT_DUP_SHARE = 0.05
DEFAULT_TWIN_SHARE = 0.01
_PARAGRAPHS, _PARAGRAPH_WORDS, _OWN_WORDS = 3, 60, (20, 45)  # shared paragraphs; words of each page
PLANTED_SCHEMA = pa.schema([("id", pa.string()), ("template", pa.int64())])
_DUP_BLOCK = 1_000  # near-duplicate rows are drawn per fixed block of row numbers

SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("id", pa.string()),
        ("dump", pa.string()),
        ("url", pa.string()),
        ("file_path", pa.string()),
        ("language", pa.string()),
        ("language_score", pa.float64()),
        ("token_count", pa.int64()),
        ("score", pa.float64()),
        ("int_score", pa.int64()),
    ]
)

_HF_DTYPES = {"string": "string", "double": "float64", "int64": "int64"}
_HF_FEATURES = {f.name: {"dtype": _HF_DTYPES[str(f.type)], "_type": "Value"} for f in SCHEMA}
_HF_METADATA = json.dumps({"info": {"features": _HF_FEATURES}})  # as `datasets` writes it

# Score inverse CDF: FineWeb-Edu's score quantiles as the bucketing design estimated them, plus
# p25/p99.9 shape knots that bring the mean/std to ≈ 3.01/0.40. Values are then rounded like
# bfloat16 (steps of 1/64 below 4, 1/32 above), so scores land exactly on the bucket boundaries
# 3.0, 3.5 and 4.0.
_SCORE_P = (0.0, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 0.999, 1.0)
_SCORE_V = (2.515625, 2.69, 2.90625, 3.234375, 3.578125, 3.78125, 4.125, 4.5, 5.21875)
SCORE_MIN, SCORE_MAX = _SCORE_V[0], _SCORE_V[-1]

# Document length in words: lognormal (median ≈ 3.2 KB of text, mean ≈ 5.3 KB), clipped to [30,
# ~200 KB]. A smaller median shortens every text alike (the shape stays), e.g. to fit a dump's size
# on a disk; sigma sets the tail (a lognormal's mean is its median × exp(sigma² / 2)).
DEFAULT_MEDIAN_WORDS, DEFAULT_WORDS_SIGMA = 620, 1.0
# FineWeb-Edu's measured text length, 2,398 characters median and 3,403 mean, at this vocabulary's
# ~5.17 characters a word (separators included): 2,398 / 5.17 ≈ 464 words, sigma √(2 ln(3,403 / 2,398)).
FINEWEB_EDU_MEDIAN_WORDS, FINEWEB_EDU_WORDS_SIGMA = 464, 0.837
_WORDS_MIN, _WORDS_MAX = 30, 34_000
_TOKENS_PER_WORD = 1.3

_VOCAB = """
the of and to a in is that for it as was with be by on not he this are or his from at which but
have an they you were her she there one all we their has been if more when will would who so no
can its about other into only some time these two may then do first any my now such like our over
man me even most made after also did many before must through back years where much your way well
down should because each just those people how too little state good very make world still own
see men work long get here between both life being under never day same another know while last
might us great old year off come since against go came right used take three states himself few
house use during without again place around however home small found thought went say part once
general high upon school every does got united left number course war until always away something
fact though water less public put think almost hand enough far took head yet government system
better set told nothing night end why called find look going knew asked later point next
program city business give group toward young days let room president side social given present
several order national possible rather second face per among form important often things looked
early white case large need big four within felt children along saw best church ever least power
development light thing seemed family interest want members others mind country area done open
god service certain kind problem began different door thus help sense means whole matter perhaps
itself york times law human line above name example action company hands local show whether five
history gave today either act feet across taken past quite anything seen having death week
experience body word half really field am car words already themselves information tell college
shall money period held keep sure probably free real seems behind cannot miss political air
question making office brought whose special major heard problems federal became study ago moment
available known result street economic boy position reason change south board individual job
society areas west close turned love community true court force full seem art role age leave
nature level story level figure research plan process student teacher learning students science
education knowledge language class lesson reading writing energy cell cells species plants animals
earth planet solar climate weather temperature growth health disease treatment patients medical
data analysis model theory method methods evidence results study studies chapter section material
materials structure function system systems chemical physical social cultural ancient modern
century centuries culture religion empire population economy trade market industry technology
computer software network internet digital information design engineering building structure
mathematics equation number numbers value values average simple complex basic common important
learn understand explain describe discuss compare consider include provide develop improve create
produce require support increase reduce allow remain become continue follow happen suggest
natural environment environmental forest ocean river soil rock mineral energy carbon oxygen water
protein gene genes blood brain heart muscle bone skin child parents family early reading activity
activities skills practice teaching classroom curriculum assessment training program programs
university library museum author book books article paper report journal review source sources
"""
VOCAB = tuple(dict.fromkeys(_VOCAB.split()))  # de-duplicated, roughly most common first
_SEPARATORS = (" ", ", ", ". ", ".\n\n", ".")  # within sentence, comma, sentence, paragraph, end
_SEP_SPACE, _SEP_COMMA, _SEP_SENTENCE, _SEP_PARAGRAPH, _SEP_END = range(5)
_N_VARIANTS = 2 * len(_SEPARATORS)  # token = word * _N_VARIANTS + capitalised * 5 + separator


def write_sample_dumps(
    root: Path,
    dumps: Sequence[str] = DEFAULT_DUMPS,
    rows_per_dump: int = DEFAULT_ROWS,
    files_per_dump: int = 1,
    seed: int = 0,
    dup_share: float = DEFAULT_DUP_SHARE,
    twin_share: float = DEFAULT_TWIN_SHARE,
    paragraph_share: float = 0.0,
    probe_plant_share: float = 0.0,
) -> dict[str, list[Path]]:
    """Write several sample dumps under `root/data/`; returns the files written per dump."""
    return {
        dump: write_sample_dump(
            root, dump, rows_per_dump, files_per_dump, seed, dup_share,
            twin_share=twin_share, paragraph_share=paragraph_share, probe_plant_share=probe_plant_share,
        )
        for dump in dumps
    }


def write_sample_dump(
    root: Path,
    dump: str,
    rows: int,
    files: int = 1,
    seed: int = 0,
    dup_share: float = DEFAULT_DUP_SHARE,
    row_group_size: int = ROW_GROUP_SIZE,
    twin_share: float = DEFAULT_TWIN_SHARE,
    paragraph_share: float = 0.0,
    probe_plant_share: float = 0.0,
    median_words: int = DEFAULT_MEDIAN_WORDS,
    words_sigma: float = DEFAULT_WORDS_SIGMA,
) -> list[Path]:
    """Write one dump as `root/data/<dump>/train-{i:05d}-of-{files:05d}.parquet`; returns the paths.

    Files are written atomically, in order; stale `train-*.parquet` files of an earlier run with
    another file count are removed afterwards. The planted copies' ground truth goes to
    `root/planted/<dump>.parquet`; the probe plants' (if any) to `root/planted/<dump>.probe.parquet`.
    """
    _dump_start(dump)  # validate the name before writing anything
    shares = (dup_share, twin_share, paragraph_share, 2 * probe_plant_share)
    shares_ok = all(0 <= share <= 1 for share in shares)
    lengths_ok = median_words >= 1 and 0 <= words_sigma < np.inf
    if rows < 0 or files < 1 or row_group_size < 1 or seed < 0 or not lengths_ok or not shares_ok:
        raise ValueError(
            f"{dump}: need rows >= 0, files >= 1, row_group_size >= 1, seed >= 0, median_words >= 1, "
            f"a finite words_sigma >= 0 and shares in [0, 1] (got {rows=}, {files=}, {row_group_size=}, {seed=}, "
            f"{median_words=}, {words_sigma=}, {dup_share=}, {twin_share=}, {paragraph_share=}, "
            f"{probe_plant_share=} at most 0.5)"
        )
    folder = source_dump_dir(Path(root), dump)
    folder.mkdir(parents=True, exist_ok=True)
    paths, planted, plants = [], [], []

    def chunks(start: int, stop: int) -> Iterator[pa.Table]:
        for lo in range(start, stop, row_group_size):
            hi = min(lo + row_group_size, stop)
            table = sample_table(
                dump, lo, hi, seed, dup_share, twin_share, paragraph_share, median_words, words_sigma
            )
            templates = planted_templates(seed, lo, hi, dup_share, twin_share)
            chosen = np.flatnonzero(templates >= 0)
            planted.append(pa.table([table["id"].take(chosen), templates[chosen]], schema=PLANTED_SCHEMA))
            if probe_plant_share:
                table, kinds = _with_probe_plants(table, dump, lo, seed, probe_plant_share, templates >= 0)
                plants.append(kinds)
            yield table

    for i, (start, stop) in enumerate(file_row_ranges(rows, files)):
        path = folder / f"train-{i:05d}-of-{files:05d}.parquet"
        write_parquet_atomically(path, chunks(start, stop))
        paths.append(path)
    for stale in set(folder.glob("train-*-of-*.parquet")) - set(paths):
        stale.unlink()
    truth = planted_truth_path(Path(root), dump)
    truth.parent.mkdir(exist_ok=True)
    write_parquet_atomically(truth, planted, PLANTED_SCHEMA)
    if probe_plant_share:
        write_parquet_atomically(planted_probe_truth_path(Path(root), dump), plants, probe_plants.PLANT_SCHEMA)
    return paths


def _with_probe_plants(
    table: pa.Table, dump: str, start: int, seed: int, share: float, copies: np.ndarray
) -> tuple[pa.Table, pa.Table]:
    """The rows with probe plants in place of some that copy no template (fw_assets.synthetic.
    probe_plants), and which ids became which kind. Drawn apart from the rows' own generators."""
    draws = _rng(seed, "probe-plants", dump, start).random(table.num_rows)
    kinds = np.where(copies, -1, np.where(draws < share, 0, np.where(draws < 2 * share, 1, -1)))
    chosen = np.flatnonzero(kinds >= 0)
    if not len(chosen):
        return table, probe_plants.PLANT_SCHEMA.empty_table()
    texts, scores = table["text"].to_pylist(), table["score"].to_numpy().copy()
    counts = table["token_count"].to_numpy().copy()
    for i in chosen.tolist():
        rng = _rng(seed, "probe-plant", dump, start + i)
        texts[i] = probe_plants.plant_text(probe_plants.KINDS[kinds[i]], rng)
        scores[i] = probe_plants.top_score(rng)
        counts[i] = int(np.rint(len(texts[i].split()) * _TOKENS_PER_WORD))
    for name, values in (("text", pa.array(texts, pa.string())), ("score", scores),
                         ("int_score", int_scores(scores)), ("token_count", counts)):
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, SCHEMA.field(name).type))
    names = pa.array([probe_plants.KINDS[k] for k in kinds[chosen]], pa.string())
    return table, pa.table([table["id"].take(chosen), names], schema=probe_plants.PLANT_SCHEMA)


def sample_table(
    dump: str,
    start: int,
    stop: int,
    seed: int = 0,
    dup_share: float = DEFAULT_DUP_SHARE,
    twin_share: float = DEFAULT_TWIN_SHARE,
    paragraph_share: float = 0.0,
    median_words: int = DEFAULT_MEDIAN_WORDS,
    words_sigma: float = DEFAULT_WORDS_SIGMA,
) -> pa.Table:
    """Rows `start..stop-1` of a sample dump, as a table with `SCHEMA`."""
    n = stop - start
    rng = _rng(seed, "rows", dump, start)
    lengths = (median_words, words_sigma)
    tokens, counts = _doc_tokens(rng, n, *lengths)
    scores = sample_scores(rng, n)
    urls = _urls(rng, n)
    docs = np.split(tokens, np.cumsum(counts)[:-1]) if n else []
    for i in np.flatnonzero(_is_duplicate(seed, start, stop, dup_share)):
        docs[i], scores[i], urls[i] = _near_duplicate(seed, start + int(i), rng, *lengths)
    for i in np.flatnonzero(_is_twin(seed, start, stop, dup_share, twin_share)):
        row = start + int(i)  # edits drawn apart from `rng`: the other rows stay as they were
        docs[i], scores[i], urls[i] = _near_duplicate(seed, row - row % 2, _rng(seed, "twin", dump, row), *lengths)
    planted = planted_templates(seed, start, stop, dup_share, twin_share) >= 0
    for i in np.flatnonzero(_is_duplicate(seed, start, stop, paragraph_share, "paragraph") & ~planted):
        docs[i] = _with_shared_paragraph(seed, dump, start + int(i), docs[i])
    tokens = np.concatenate(docs) if n else np.zeros(0, np.int32)
    counts = np.array([len(d) for d in docs], dtype=np.int64)
    columns = {
        "text": _render(tokens, counts),
        "id": _uuids(rng, n),
        "dump": [dump] * n,
        "url": urls,
        "file_path": _file_paths(rng, dump, n),
        "language": ["en"] * n,
        "language_score": 0.65 + 0.35 * rng.beta(4.0, 1.2, n),
        "token_count": np.rint(counts * _TOKENS_PER_WORD).astype(np.int64),
        "score": scores,
        "int_score": int_scores(scores),
    }
    return pa.table(columns, schema=SCHEMA)


def sample_scores(rng: np.random.Generator, n: int) -> np.ndarray:
    """`n` classifier-like scores: the seed's distribution, bfloat16-rounded, clipped to
    [2.515625, 5.21875]."""
    x = np.interp(rng.random(n), _SCORE_P, _SCORE_V)
    step = np.where(x < 4.0, 1 / 64, 1 / 32)
    return np.clip(np.round(x / step) * step, SCORE_MIN, SCORE_MAX)


def int_scores(scores: np.ndarray) -> np.ndarray:
    """`int(round(clamp(score, 0, 5)))` per row; `np.rint` rounds half to even like `round`."""
    return np.rint(np.clip(scores, 0.0, 5.0)).astype(np.int64)


# --- files ---------------------------------------------------------------------------------


def file_row_ranges(rows: int, files: int) -> list[tuple[int, int]]:
    """Split `rows` into `files` contiguous ranges differing in size by at most one."""
    bounds = [rows * i // files for i in range(files + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def write_parquet_atomically(
    path: Path, chunks: Iterable[pa.Table], schema: pa.Schema | None = None
) -> None:
    """Write tables as row groups to a hidden temp file beside `path`, then rename it into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    schema = schema or SCHEMA.with_metadata({"huggingface": _HF_METADATA})
    try:
        with pq.ParquetWriter(tmp, schema, compression="snappy") as writer:
            for table in chunks:
                writer.write_table(table)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- randomness ----------------------------------------------------------------------------


def _rng(seed: int, *key: str | int) -> np.random.Generator:
    """A generator that depends only on `seed` and `key` (strings hashed stably)."""
    words = [
        int.from_bytes(hashlib.blake2b(k.encode(), digest_size=8).digest(), "little")
        if isinstance(k, str) else k
        for k in key
    ]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=words)))


def _is_duplicate(seed: int, start: int, stop: int, share: float, key: str = "dup") -> np.ndarray:
    """Whether rows `start..stop-1` are near-duplicates: the same rows in every dump."""
    first, last = start // _DUP_BLOCK, max(start, stop - 1) // _DUP_BLOCK
    u = np.concatenate([_rng(seed, key, b).random(_DUP_BLOCK) for b in range(first, last + 1)])
    offset = start - first * _DUP_BLOCK
    return u[offset : offset + stop - start] < share


def _is_twin(seed: int, start: int, stop: int, dup_share: float, twin_share: float) -> np.ndarray:
    """Whether rows `start..stop-1` belong to a chosen pair (2m, 2m + 1) with no across-dump copy."""
    first_pair, end_pair = start // 2, (max(start, stop - 1)) // 2 + 1
    pairs = _is_duplicate(seed, first_pair, end_pair, twin_share, "twin")
    either_copy = _is_duplicate(seed, 2 * first_pair, 2 * end_pair, dup_share).reshape(-1, 2).any(axis=1)
    rows = np.arange(start, stop) // 2 - first_pair
    return (pairs & ~either_copy)[rows] if stop > start else np.zeros(0, bool)


def planted_templates(
    seed: int, start: int, stop: int, dup_share: float = DEFAULT_DUP_SHARE,
    twin_share: float = DEFAULT_TWIN_SHARE,
) -> np.ndarray:
    """The template each of rows `start..stop-1` copies, or -1 for a row of its own."""
    rows = np.arange(start, stop, dtype=np.int64)
    templates = np.where(_is_duplicate(seed, start, stop, dup_share), rows, -1)
    return np.where(_is_twin(seed, start, stop, dup_share, twin_share), rows - rows % 2, templates)


def _near_duplicate(
    seed: int, row: int, rng: np.random.Generator, median_words: int, words_sigma: float
) -> tuple[np.ndarray, float, str]:
    """Template `row` (tokens, score, url), with a few words changed using `rng`."""
    template = _rng(seed, "template", row)
    tokens, _ = _doc_tokens(template, 1, median_words, words_sigma)
    score, url = float(sample_scores(template, 1)[0]), _urls(template, 1)[0]
    edits = rng.choice(len(tokens), size=1 + len(tokens) // 200, replace=False)
    words, variants = np.divmod(tokens[edits], _N_VARIANTS)
    new_words = (words + rng.integers(1, len(VOCAB), len(edits))) % len(VOCAB)
    tokens[edits] = new_words * _N_VARIANTS + variants
    return tokens, score, url


def _with_shared_paragraph(seed: int, dump: str, row: int, tokens: np.ndarray) -> np.ndarray:
    """The first few words of the page, then one of the shared paragraphs."""
    rng = _rng(seed, "paragraph", dump, row)
    paragraph, _ = _doc_tokens(_rng(seed, "paragraph", int(rng.integers(_PARAGRAPHS))), 1)
    return np.concatenate([tokens[: rng.integers(*_OWN_WORDS)], np.resize(paragraph, _PARAGRAPH_WORDS)])


def _uuids(rng: np.random.Generator, n: int) -> list[str]:
    """`<urn:uuid:…>` ids shaped like uuid4 (version 4, RFC 4122 variant)."""
    b = rng.integers(0, 256, (n, 16), dtype=np.uint8)
    b[:, 6] = (b[:, 6] & 0x0F) | 0x40
    b[:, 8] = (b[:, 8] & 0x3F) | 0x80
    hexes = b.tobytes().hex()
    return [
        f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"
        for h in (hexes[32 * i : 32 * i + 32] for i in range(n))
    ]


# --- text ----------------------------------------------------------------------------------


def _draw_table(weights: np.ndarray, size: int = 1 << 16) -> np.ndarray:
    """Outcome per uniform 16-bit draw, so that outcome i comes with probability ∝ weights[i]."""
    cdf = np.cumsum(weights) / np.sum(weights)
    return np.searchsorted(cdf, (np.arange(size) + 0.5) / size).astype(np.int32)


_WORD_TABLE = _draw_table(1.0 / (np.arange(len(VOCAB)) + 10.0))  # Zipf-like word ranks
# Separator after a word: ~7% commas, sentences of ~16 words, paragraphs of ~5 sentences.
_SEP_TABLE = _draw_table(np.array([0.93 - 1 / 16, 0.07, 1 / 16 - 1 / 80, 1 / 80, 0.0]))


def _piece_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (word, capitalised, separator) piece as bytes: flat buffer, offsets, lengths."""
    pieces = [
        (w.capitalize() if cap else w) + sep
        for w in VOCAB for cap in (False, True) for sep in _SEPARATORS
    ]
    encoded = [p.encode("ascii") for p in pieces]
    lengths = np.array([len(p) for p in encoded], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets, lengths


_PIECES, _PIECE_OFFSETS, _PIECE_LENGTHS = _piece_table()


def _doc_tokens(
    rng: np.random.Generator, n: int, median_words: int = DEFAULT_MEDIAN_WORDS,
    words_sigma: float = DEFAULT_WORDS_SIGMA,
) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of `n` documents (flat int32) and words per document (heavy-tailed)."""
    counts = np.clip(
        np.rint(rng.lognormal(np.log(median_words), words_sigma, n)), _WORDS_MIN, _WORDS_MAX
    ).astype(np.int64)
    total = int(counts.sum())
    words = _WORD_TABLE[rng.integers(0, len(_WORD_TABLE), total, dtype=np.uint16)]
    sep = _SEP_TABLE[rng.integers(0, len(_SEP_TABLE), total, dtype=np.uint16)]
    sep[np.cumsum(counts) - 1] = _SEP_END
    capital = np.ones(total, dtype=np.int32)
    capital[1:] = sep[:-1] >= _SEP_SENTENCE  # first word of each document and sentence
    return words * _N_VARIANTS + capital * len(_SEPARATORS) + sep, counts


def _render(tokens: np.ndarray, counts: np.ndarray) -> pa.StringArray:
    """Assemble documents' bytes with numpy gathers and wrap them as an arrow string array."""
    lengths = _PIECE_LENGTHS[tokens]
    ends = np.cumsum(lengths, dtype=np.int64)
    total = int(ends[-1]) if len(ends) else 0
    if total >= 2**31:
        raise ValueError(f"row group too large for 32-bit string offsets: {total} bytes")
    shift = (_PIECE_OFFSETS[tokens] - (ends - lengths)).astype(np.int32)
    data = _PIECES[np.repeat(shift, lengths) + np.arange(total, dtype=np.int32)]
    doc_ends = ends[np.cumsum(counts) - 1] if len(counts) else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], doc_ends]).astype(np.int32)
    return pa.StringArray.from_buffers(len(counts), pa.py_buffer(offsets), pa.py_buffer(data))


# --- url and file_path ---------------------------------------------------------------------


def _urls(rng: np.random.Generator, n: int) -> list[str]:
    """Plausible `https://www.<site>.com/<path>` urls."""
    w = np.asarray(VOCAB, dtype=object)[rng.integers(0, len(VOCAB), (n, 5))]
    return [f"https://www.{a}{b}.com/{c}/{d}-{e}" for a, b, c, d, e in w]


def _dump_start(dump: str) -> dt.datetime:
    """Start (UTC) of the crawl week named by `CC-MAIN-YYYY-WW`."""
    match = DUMP_NAME_PATTERN.fullmatch(dump)
    if match:
        try:
            start = dt.datetime.fromisocalendar(int(match[1]), int(match[2]), 1)
            return start.replace(tzinfo=dt.timezone.utc)
        except ValueError:
            pass
    raise ValueError(f"dump name must be CC-MAIN-YYYY-WW with a valid ISO week, got {dump!r}")


def _file_paths(rng: np.random.Generator, dump: str, n: int, segments: int = 100) -> list[str]:
    """`s3://commoncrawl/crawl-data/<dump>/segments/<ms>.<k>/warc/CC-MAIN-<ts>-<nnnnn>.warc.gz`."""
    start = _dump_start(dump)
    prefixes = []
    for s in range(segments):
        t = start + dt.timedelta(seconds=s * 5_437)
        ms = int(t.timestamp() * 1000) + s * 7
        prefixes.append(
            f"s3://commoncrawl/crawl-data/{dump}/segments/{ms}.{s % 11}/warc/"
            f"CC-MAIN-{t:%Y%m%d%H%M%S}-"
        )
    seg = rng.integers(0, segments, n)
    part = rng.integers(0, 640, n)
    return [f"{prefixes[s]}{p:05d}.warc.gz" for s, p in zip(seg, part)]

