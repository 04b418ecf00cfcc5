"""Dedup decisions of one dump, from its minhash file and the minhash files of earlier dumps.

The rule, decided from signatures only, so that it does not depend on the order dumps are
processed in nor on the thread count:
1. A candidate pair (a shared band key) counts only if its estimated Jaccard reaches the policy's
   verify_threshold. Verified pairs within the dump join documents into clusters (union-find);
   the documents sharing a key are verified against its least id, those failing against the
   least id among them, and so on (up to the policy's anchor_rounds).
2. A cluster is dropped whole if any member matches a document of an earlier dump. A member with
   its own earlier match points at its best (highest similarity; ties: earliest dump, then least
   id); the others point at the best match of their cluster.
3. Otherwise the cluster keeps its highest-scoring document (ties: least id); the others point
   at it.
"""

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fw_assets.dedup.checked_arrow import CheckedArrow, CheckedBatches
from fw_assets.dedup.minhash_policy import MinhashPolicy, Scope
from fw_assets.dedup.row_groups import write_in_row_groups
from fw_assets.dedup.signature_files import MinhashFileError, check_minhash_file, mapped_signatures
from fw_assets.dedup.signing import estimated_jaccard
from fw_assets.dedup.sorted_keys import KeyIndex, key_index, matching_rows, read_sorted_keys
from fw_assets.lib.compiled import pack_pairs, unpack_pairs
from fw_assets.lib.ordered_map import ordered_map
from fw_assets.lib.sql import load_sql
from fw_assets.paths import signatures_path, sorted_keys_path

DECISION_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("bucket", pa.string()),
        ("keep", pa.bool_()),
        ("duplicate_of", pa.string()),
        ("duplicate_of_dump", pa.string()),
        ("similarity", pa.float64()),
    ]
)
DROP_SCHEMA = pa.schema(
    [DECISION_SCHEMA.field(c) for c in ("id", "duplicate_of", "duplicate_of_dump", "similarity")]
)
POLICY_KEY = b"fw_assets.dedup.fingerprint"
DUMP_KEY = b"fw_assets.dedup.dump"
ROW_GROUP_ROWS = 65_536


@dataclass(frozen=True)
class Match:
    """A verified earlier document: `other` of `dump` (`dump_order`: its place in crawl order), its similarity."""

    other: str
    dump: str
    dump_order: int
    similarity: float
    signature: bytes

    def order(self) -> tuple:
        """Best first: highest similarity, then earliest dump, then least id."""
        return (-self.similarity, self.dump_order, self.other)


@dataclass(frozen=True)
class EarlierMatches:
    """The best verified earlier match of each document that has one: `table` (id, duplicate_of,
    duplicate_of_dump, similarity, dump_order) and the matches' signatures, row for row."""

    table: pa.Table
    signatures: np.ndarray

    @classmethod
    def none(cls) -> "EarlierMatches":
        schema = pa.schema([*DROP_SCHEMA, ("dump_order", pa.int64())])
        return cls(schema.empty_table(), np.zeros((0, 0), np.uint8))

    def matches(self, rows: np.ndarray) -> dict[str, Match]:
        """The rows at `rows` as Match objects, by document id."""
        picked = self.table.take(rows).to_pydict()
        return {
            doc: Match(other, dump, dump_order, similarity, self.signatures[row].tobytes())
            for doc, other, dump, dump_order, similarity, row in zip(
                picked["id"], picked["duplicate_of"], picked["duplicate_of_dump"], picked["dump_order"],
                picked["similarity"], rows,
            )
        }


@dataclass(frozen=True)
class DecisionSummary:
    documents: int
    dropped_within_dump: int
    dropped_against_earlier: int


def decide_dump(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    minhash_path: Path,
    earlier: Sequence[tuple[str, Path]],
    output: Path,
    policy: MinhashPolicy,
    threads: int = 1,
) -> DecisionSummary:
    """Write one decision per document of `dump` to `output`; `earlier` is (dump, minhash file)
    of every earlier dump that has one, in any order, read on `threads` threads (the same bytes at
    any count)."""
    check_minhash_file(minhash_path, policy, dump)
    earlier = sorted(earlier) if policy.scope is Scope.ACROSS_DUMPS else []
    for earlier_dump, path in earlier:
        if earlier_dump >= dump:
            raise ValueError(f"{path}: dump {earlier_dump} is not earlier than {dump}")
        check_minhash_file(path, policy, earlier_dump)
    with _named_if_unreadable(minhash_path, dump):
        current = CurrentDump.read(minhash_path, policy)
    edges, best = [], EarlierMatches.none()
    if policy.scope is not Scope.OFF:
        edges, best = _within_and_earlier(current, earlier, policy, threads)
    drops = _drops(current, dump, edges, best, policy)
    con.register("current_documents", current.rows.select(["id", "bucket"]))
    con.register("drops", drops)
    _write_decisions(con.sql(load_sql("dedup_decisions")), output, dump, policy)
    con.unregister("drops")
    con.unregister("current_documents")
    within = pc.sum(pc.equal(drops.column("duplicate_of_dump"), dump)).as_py() or 0
    return DecisionSummary(current.rows.num_rows, within, drops.num_rows - within)


def _signatures(column: pa.FixedSizeBinaryArray, policy: MinhashPolicy) -> np.ndarray:
    """Stored b-bit signatures as a (rows, permutations) matrix, in place."""
    values = np.frombuffer(column.buffers()[1], policy.signature_dtype)
    return values.reshape(-1, policy.permutations)[column.offset : column.offset + len(column)]


def _signatures_at(signed: CheckedArrow, rows: np.ndarray, policy: MinhashPolicy) -> np.ndarray:
    """The signatures at `rows` of a signatures file, gathered a chunk at a time in place (a take
    over the chunked column copies it whole first), each chunk's pages let go once gathered from:
    memory for one chunk of the file, wherever the rows are."""
    column = signed.table.column("signature")
    rows = np.asarray(rows, dtype=np.int64)
    found = np.empty((len(rows), policy.permutations), policy.signature_dtype)
    starts = np.cumsum([0] + [len(chunk) for chunk in column.chunks])
    by_chunk = np.argsort(rows, kind="stable")
    bounds = np.searchsorted(rows[by_chunk], starts)
    for i, chunk in enumerate(column.chunks):
        mine = by_chunk[bounds[i]: bounds[i + 1]]
        if len(mine):
            found[mine] = _signatures(chunk, policy)[rows[mine] - starts[i]]
            signed.let_go([chunk])
    return found


def _similarity(a: bytes, b: bytes, policy: MinhashPolicy) -> float:
    pair = np.frombuffer(a, policy.signature_dtype), np.frombuffer(b, policy.signature_dtype)
    return float(estimated_jaccard(*pair, policy.signature_bits))


@dataclass(frozen=True)
class CurrentDump:
    """What deciding needs of the dump being decided: its minhash rows (id, bucket, score) and its
    sorted band keys in memory, its signatures in minhash-file order memory-mapped (their pages
    read as needed: `_signatures_at`). The rows are read once with their page checksums verified
    (DuckDB's parquet reader does not verify them), and only its id and bucket columns are handed
    to DuckDB, to write the decisions."""

    rows: pa.Table
    ids: pa.ChunkedArray
    signed: CheckedArrow  # the signatures file's signature column
    keys: tuple[np.ndarray, np.ndarray]


    @classmethod
    def read(cls, minhash_path: Path, policy: MinhashPolicy) -> "CurrentDump":
        columns = ["id", "bucket", "score"]
        rows = pq.read_table(minhash_path, columns=columns, page_checksum_verification=True)
        ids = rows.column("id")
        if not _same_ids(ids, CheckedBatches(signatures_path(minhash_path), ["id"])):
            raise ValueError("its signatures file holds other ids or rows; re-materialize its minhash")
        signed = mapped_signatures(minhash_path, ["signature"])
        return cls(rows, ids, signed, read_sorted_keys(sorted_keys_path(minhash_path)))


def _same_ids(ids: pa.ChunkedArray, batches: Iterable[pa.RecordBatch]) -> bool:
    """Whether the batches' ids are `ids`, in order (compared a batch at a time)."""
    at = 0
    for batch in batches:
        if not ids.slice(at, batch.num_rows).combine_chunks().equals(batch.column(0)):
            return False
        at += batch.num_rows
    return at == len(ids)


def _within_and_earlier(
    current: CurrentDump, earlier: Sequence[tuple[str, Path]], policy: MinhashPolicy, threads: int
) -> tuple[list[tuple[str, str]], EarlierMatches]:
    """The verified pairs within the dump, and each document's best earlier match. On more than
    one thread the earlier dumps are matched (on `threads` threads) while the dump's own pairs
    are verified, so that reading them adds less wall time."""
    if not earlier:
        return _verified_within(current, policy), EarlierMatches.none()
    if threads <= 1:
        return _verified_within(current, policy), _best_earlier_matches(current, earlier, policy, 1)
    with ThreadPoolExecutor(1) as background:
        best = background.submit(_best_earlier_matches, current, earlier, policy, threads)
        return _verified_within(current, policy), best.result()


def _verified_within(current: CurrentDump, policy: MinhashPolicy) -> list[tuple[str, str]]:
    """(id, anchor) of the candidate pairs within the dump that pass verification. A document
    sharing a band key is paired with the key's anchor, the least id holding it; those failing
    against it are paired with the least id among them, and so on for up to the policy's
    anchor_rounds anchors a key. A group of g documents gives about g pairs a round, not
    g(g-1)/2 (a page repeated 10,000 times stays cheap), yet two members both unlike the least id
    but alike each other are compared. Found in the dump's sorted keys, already in memory, as runs
    of equal keys."""
    keys, rows = current.keys
    by_id = pc.sort_indices(current.ids).to_numpy()
    id_rank = np.empty(len(by_id), np.int64)
    id_rank[by_id] = np.arange(len(by_id))
    # A pair is one uint64, rank << 32 | anchor rank (pack_pairs: a dump holds under 2^32 ids),
    # so np.unique finds the distinct pairs in one sort. uint64 throughout: concatenating int64
    # with uint64 would give float64. The keys are taken a span of whole runs of equal keys at a
    # time (a key's run is all its documents): the same pairs, memory for one span.
    verified = [np.empty(0, np.uint64)]
    for start, end in _key_spans(keys, WITHIN_SPAN_KEYS):
        verified.append(_verified_span(current, keys[start:end], id_rank[rows[start:end]], by_id, policy))
    own_rank, anchor_rank = unpack_pairs(np.unique(np.concatenate(verified)))
    own, anchor = by_id[own_rank], by_id[anchor_rank]
    return list(zip(current.ids.take(own).to_pylist(), current.ids.take(anchor).to_pylist()))


WITHIN_SPAN_KEYS = 1 << 21  # sorted keys verified at a time (~40 bytes a key while they are)


def _key_spans(keys: np.ndarray, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of consecutive spans of sorted `keys`, about `size` keys each, never splitting a
    run of equal keys."""
    start = 0
    while start < len(keys):
        end = min(start + size, len(keys))
        while end < len(keys) and keys[end] == keys[end - 1]:
            end += 1
        yield start, end
        start = end


def _verified_span(current: CurrentDump, keys: np.ndarray, ranks: np.ndarray, by_id: np.ndarray,
                   policy: MinhashPolicy) -> np.ndarray:
    """The verified pairs (rank << 32 | anchor rank) of a span of whole runs of equal keys, their
    documents' id ranks `ranks`: each key's documents against its anchor, for up to the policy's
    anchor_rounds rounds."""
    verified = [np.empty(0, np.uint64)]
    for _ in range(policy.anchor_rounds):
        if not len(keys):
            break
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        sizes = np.diff(np.r_[starts, len(keys)])
        anchors = np.repeat(np.minimum.reduceat(ranks, starts), sizes)
        paired = np.flatnonzero(np.repeat(sizes > 1, sizes) & (ranks != anchors))
        pairs, pair_of = np.unique(pack_pairs(ranks[paired], anchors[paired]), return_inverse=True)
        own_rank, anchor_rank = unpack_pairs(pairs)
        own, anchor = by_id[own_rank], by_id[anchor_rank]
        similarity = estimated_jaccard(_signatures_at(current.signed, own, policy),
                                       _signatures_at(current.signed, anchor, policy), policy.signature_bits)
        passed = similarity >= policy.verify_threshold
        verified.append(pairs[passed])
        failed = paired[~passed[pair_of]]  # the next round's groups: each key's failed members
        keys, ranks = keys[failed], ranks[failed]
    return np.concatenate(verified)


Matches = tuple[pa.Table, np.ndarray]  # (own, other, similarity, dump_order) rows and others' signatures


def _best_earlier_matches(
    current: CurrentDump, earlier: Sequence[tuple[str, Path]], policy: MinhashPolicy, threads: int
) -> EarlierMatches:
    """Each document's best verified match in the earlier dumps, folded in crawl order into a
    running best per document. The files are read and matched on `threads` threads, no more than
    `threads` of them at once: memory follows the dump's own size and the thread count, not the
    number of earlier dumps a recurring page matches in."""

    index = key_index(*current.keys)

    def matched(ordered: tuple[int, tuple[str, Path]]) -> Matches:
        dump_order, (earlier_dump, path) = ordered
        with _named_if_unreadable(path, earlier_dump):
            return _best_per_document(*_verified_earlier(current, index, path, dump_order, policy))

    per_file = ordered_map(matched, enumerate(earlier), threads, in_flight=threads)
    # reduce holds no file's matches once folded in, while the next file is read
    found, signatures = reduce(_better_of, per_file)
    if not found.num_rows:
        return EarlierMatches.none()
    dumps = pa.array([d for d, _ in earlier], pa.string())
    matches = pa.table({
        "id": current.ids.take(found.column("own")),
        "duplicate_of": found.column("other"),
        "duplicate_of_dump": dumps.take(found.column("dump_order")),
        "similarity": found.column("similarity"),
        "dump_order": found.column("dump_order"),
    })
    return EarlierMatches(matches, signatures)


def _best_per_document(found: pa.Table, signatures: np.ndarray) -> Matches:
    """Each document's best match in one earlier dump: highest similarity, then least id. Sorted
    by number; only the rows tying their document's best similarity, few, are sorted by id."""
    own, similarity = found.column("own").to_numpy(), found.column("similarity").to_numpy()
    order = np.lexsort((-similarity, own))
    starts = np.flatnonzero(np.diff(own[order], prepend=-1))  # own rows are >= 0
    sizes = np.diff(np.r_[starts, len(order)])
    at_best = order[similarity[order] == np.repeat(similarity[order[starts]], sizes)]
    first = order[starts]
    if len(at_best) > len(first):  # ties: the least id among them
        by_id = pc.sort_indices(found.take(at_best), [("own", "ascending"), ("other", "ascending")])
        at_best = at_best[by_id.to_numpy()]
        first = at_best[np.flatnonzero(np.diff(own[at_best], prepend=-1))]
    return found.take(first), signatures[first]


def _better_of(best: Matches, later: Matches) -> Matches:
    """The running best after the best matches of the next earlier dump in crawl order, both by
    document: a later dump's match replaces a document's only if more similar (ties go to the
    earlier dump)."""
    (table, signatures), (later_table, later_signatures) = best, later
    if not table.num_rows:
        return later
    own, later_own = table.column("own").to_numpy(), later_table.column("own").to_numpy()
    at = np.minimum(np.searchsorted(own, later_own), len(own) - 1)
    present = own[at] == later_own
    similarity = table.column("similarity").to_numpy()
    better = ~present | (later_table.column("similarity").to_numpy() > similarity[at])
    kept = np.ones(len(own), bool)
    kept[at[present & better]] = False
    merged = pa.concat_tables([table.filter(kept), later_table.filter(better)]).combine_chunks()
    order = np.argsort(merged.column("own").to_numpy(), kind="stable")
    return merged.take(order), np.concatenate([signatures[kept], later_signatures[better]])[order]


def _verified_earlier(
    current: CurrentDump, index: KeyIndex, path: Path, dump_order: int, policy: MinhashPolicy
) -> tuple[pa.Table, np.ndarray]:
    """The pairs between the dump and the earlier minhash file at `path` that share a band key
    and pass verification, as (own row, other id, similarity, dump_order), and the others' signatures.
    Of the earlier file's signatures only the rows sharing a key are taken (read in place)."""
    own, other = matching_rows(index, CheckedBatches(sorted_keys_path(path)))
    signed = mapped_signatures(path)
    table = signed.table
    other_signatures = _signatures_at(signed, other, policy)
    similarity = estimated_jaccard(_signatures_at(current.signed, own, policy), other_signatures,
                                   policy.signature_bits)
    passed = np.flatnonzero(similarity >= policy.verify_threshold)
    verified = pa.table({
        "own": own[passed],
        "other": table.column("id").take(other[passed]),
        "similarity": similarity[passed],
        "dump_order": np.full(len(passed), dump_order, np.int64),
    })
    return verified, other_signatures[passed]


@contextmanager
def _named_if_unreadable(path: Path, dump: str) -> Iterator[None]:
    """A minhash or keys file that cannot be read, or a page failing its checksum, raises
    MinhashFileError naming the file."""
    try:
        yield
    except (OSError, ValueError, pa.ArrowException) as error:
        raise MinhashFileError(f"{path}: unreadable minhash file of {dump} ({error})") from error


def _clusters(edges: Sequence[tuple]) -> list[list[str]]:
    """Connected components of the verified pairs (union-find with path halving)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b, *_ in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    components: dict[str, list[str]] = {}
    for x in parent:
        components.setdefault(root(x), []).append(x)
    return list(components.values())


def _scores_and_signatures(
    current: CurrentDump, ids: set[str], policy: MinhashPolicy
) -> dict[str, tuple[float, bytes]]:
    """(score, signature) of the documents in a within-dump cluster, found by a hash of them (a
    few) rather than of the dump's ids."""
    in_clusters = pc.is_in(current.ids, value_set=pa.array(sorted(ids), pa.string()))
    rows = np.flatnonzero(in_clusters.to_numpy(zero_copy_only=False))
    scores = current.rows.column("score").take(rows).to_pylist()
    signatures = _signatures_at(current.signed, rows, policy)
    return {
        doc: (score, signature.tobytes())
        for doc, score, signature in zip(current.ids.take(rows).to_pylist(), scores, signatures)
    }


def _drops(
    current: CurrentDump,
    dump: str,
    edges: Sequence[tuple],
    best: EarlierMatches,
    policy: MinhashPolicy,
) -> pa.Table:
    """A row (id, duplicate_of, duplicate_of_dump, similarity) per dropped document: a document
    outside any within-dump cluster drops to its own best earlier match as it stands (the common
    case, columnar); the clusters, a few, are decided one by one."""
    clusters = _clusters(edges)
    clustered = {x for members in clusters for x in members}
    in_cluster = pc.is_in(best.table.column("id"), pa.array(sorted(clustered), pa.string()))
    alone = best.table.filter(pc.invert(in_cluster)).select(DROP_SCHEMA.names)
    matched = best.matches(np.flatnonzero(in_cluster.to_numpy()))
    documents = _scores_and_signatures(current, clustered, policy)
    drops = []
    for members in clusters:
        own = [matched[x] for x in members if x in matched]
        if own:  # the earliest crawl wins: the whole cluster goes
            cluster_best = min(own, key=Match.order)
            for x in members:
                if x in matched:
                    match, value = matched[x], matched[x].similarity
                else:  # dropped with its cluster: its own similarity to the cluster's match
                    match = cluster_best
                    value = _similarity(documents[x][1], match.signature, policy)
                drops.append(_drop(x, match.other, match.dump, value))
        else:
            kept = min(members, key=lambda x: (-documents[x][0], x))
            for x in members:
                if x != kept:
                    value = _similarity(documents[x][1], documents[kept][1], policy)
                    drops.append(_drop(x, kept, dump, value))
    return pa.concat_tables([alone.cast(DROP_SCHEMA), pa.Table.from_pylist(drops, DROP_SCHEMA)])


def _drop(doc: str, duplicate_of: str, duplicate_of_dump: str, similarity: float) -> dict:
    return {
        "id": doc, "duplicate_of": duplicate_of, "duplicate_of_dump": duplicate_of_dump,
        "similarity": similarity,
    }


def _write_decisions(
    decisions: duckdb.DuckDBPyRelation, output: Path, dump: str, policy: MinhashPolicy
) -> None:
    metadata = {POLICY_KEY: policy.fingerprint().encode(), DUMP_KEY: dump.encode()}
    # Fixed row groups: DuckDB does not promise the size of the chunks it hands over; the bytes
    # published must depend on the rows alone.
    batches = decisions.to_arrow_reader(ROW_GROUP_ROWS)
    write_in_row_groups(output, DECISION_SCHEMA.with_metadata(metadata), batches, ROW_GROUP_ROWS)
