"""Token files made by hand for tests: a real byte-level BPE tokenizer.json trained here, and a
Megatron `.idx` parsed field by field, straight from the spec."""

import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

# What the tiny tokenizer learns from unless told otherwise; the token-file tests write these too.
SAMPLE_TEXTS = [
    "Photosynthesis converts light energy into chemical energy.",
    "",
    "Die Zellmembran schützt das Zellinnere. 细胞膜保护细胞。 🌱🔬",
    "A literal <|endoftext|> and </s> inside a document are plain text.",
    "Line one\n\nLine two\twith a tab, and numbers 1234567890.",
]
HEADER_SIZE = 9 + 8 + 1 + 8 + 8


def write_tiny_tokenizer_json(
    path: Path, texts: Sequence[str] = SAMPLE_TEXTS, special_tokens: Sequence[str] = ("</s>", "<|endoftext|>")
) -> Path:
    """A real byte-level BPE tokenizer.json with a vocabulary far below 65,500, trained on `texts`."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts) * 20, trainer=trainer)
    tokenizer.save(str(path))
    return path


def parse_index(path: Path) -> dict:
    """Read a `.idx` field by field, straight from the spec."""
    data = path.read_bytes()
    magic = data[:9]
    version, code, sequences, documents = struct.unpack_from("<QBQQ", data, 9)
    offset = HEADER_SIZE
    lengths = np.frombuffer(data, "<i4", sequences, offset)
    offset += 4 * sequences
    pointers = np.frombuffer(data, "<i8", sequences, offset)
    offset += 8 * sequences
    document_indices = np.frombuffer(data, "<i8", documents, offset)
    offset += 8 * documents
    assert offset == len(data), "no bytes beyond the document indices"
    return dict(
        magic=magic,
        version=version,
        code=code,
        sequences=sequences,
        documents=documents,
        lengths=lengths,
        pointers=pointers,
        document_indices=document_indices,
    )
