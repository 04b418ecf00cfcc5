"""MinHash signature throughput per CPU-second of the candidate libraries, on generated text.

    python -m bench.minhash_candidates [--docs 2000] [--repeat 3] [--non-ascii]

Each candidate turns the same FineWeb-Edu-shaped documents into 112 hashes per document from
word 5-grams (14 bands x 8 rows). CPU seconds are the process's (all threads), best of the
repeats. `--non-ascii` puts typographic punctuation, an accent and CJK characters in every
document (the Arrow shingling then normalises all of them to NFD). datatrove (with spacy),
datasketch and rensa come from the bench extra; a missing one is reported as such.
"""

import argparse
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fw_assets.dedup.minhash_policy import MINHASH_POLICY
from fw_assets.dedup.shingling import shingles
from fw_assets.dedup.shingling.definition import arrow_shingles
from fw_assets.dedup.signing import band_keys, permutations, signatures_of
from fw_assets.synthetic.generator import sample_table

NON_ASCII = {" the ": " thé ", ", ": "’ ", ". ": "” 中文 "}
PERMUTATIONS = MINHASH_POLICY.permutations
NGRAM = MINHASH_POLICY.ngram


def datatrove_signatures(texts: list[str]) -> None:
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    step = MinhashDedupSignature(output_folder="/tmp/unused-minhash-bench")
    for text in texts:
        step.get_signature(step.get_shingles(text))


def datatrove_whitespace_signatures(texts: list[str]) -> None:
    """datatrove's hashing and normalisation with `str.split` instead of its spaCy tokenizer."""
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature
    from datatrove.utils.text import ngrams, simplify_text

    step = MinhashDedupSignature(output_folder="/tmp/unused-minhash-bench")
    for text in texts:
        grams = ngrams(simplify_text(text, step.config.norm_config).split(), NGRAM)
        hashes = np.fromiter((step._hash_func(" ".join(g)) for g in grams), np.uint64)
        step.get_signature(hashes.reshape(-1, 1))


def datasketch_signatures(texts: list[str]) -> None:
    from datasketch import MinHash
    from datatrove.utils.text import ngrams, simplify_text

    for text in texts:
        grams = ngrams(simplify_text(text).split(), NGRAM)
        MinHash(num_perm=PERMUTATIONS).update_batch([" ".join(g).encode() for g in grams])


def vectorised_shingles(texts: pa.Array) -> None:
    arrow_shingles(texts, NGRAM)


def fused_shingles_alone(texts: pa.Array) -> None:
    shingles(texts, NGRAM)


def numpy_signatures(texts: pa.Array) -> None:
    """The same permutations as fw_assets, one numpy pass per permutation."""
    s = arrow_shingles(texts, NGRAM)
    a, b = permutations(MINHASH_POLICY)
    starts = s.offsets[:-1][s.counts() > 0]
    for p in range(PERMUTATIONS):
        np.minimum.reduceat(s.hashes * a[p] + b[p], starts)


def rensa_signatures(texts: pa.Array) -> None:
    import rensa

    s = arrow_shingles(texts, NGRAM)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
        s.hashes, s.offsets.astype(np.uint64), PERMUTATIONS, 1
    )
    matrix.to_rows()


def arrow_shingles_signatures(texts: pa.Array) -> None:
    """What write_minhash_file computed before the fused shingler (the same values)."""
    band_keys(signatures_of(arrow_shingles(texts, NGRAM), *permutations(MINHASH_POLICY)), MINHASH_POLICY)


def fw_assets_signatures(texts: pa.Array) -> None:
    """What write_minhash_file computes: fused shingles, the numba MinHash kernel, band keys."""
    band_keys(signatures_of(shingles(texts, NGRAM), *permutations(MINHASH_POLICY)), MINHASH_POLICY)


CANDIDATES: dict[str, tuple[Callable, bool]] = {  # name: (function, takes an Arrow array)
    "datatrove MinhashDedupSignature (spaCy words)": (datatrove_signatures, False),
    "datatrove hashing, whitespace words": (datatrove_whitespace_signatures, False),
    "datasketch MinHash.update_batch": (datasketch_signatures, False),
    "vectorised shingling alone (Arrow + numpy)": (vectorised_shingles, True),
    "vectorised shingling + numpy MinHash": (numpy_signatures, True),
    "vectorised shingling + numba MinHash (64-bit) + band keys": (arrow_shingles_signatures, True),
    "fused shingling alone (numba, fw_assets.dedup.shingling)": (fused_shingles_alone, True),
    "fused shingling + numba MinHash (64-bit) + band keys: fw_assets": (fw_assets_signatures, True),
    "vectorised shingling + rensa batch (R-MinHash, 32-bit)": (rensa_signatures, True),
}


def measure(function: Callable, argument, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.process_time()
        function(argument)
        best = min(best, time.process_time() - began)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.minhash_candidates")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="substrings of candidate names")
    parser.add_argument("--non-ascii", action="store_true", help="replace " + repr(NON_ASCII))
    args = parser.parse_args(argv)
    texts = sample_table("CC-MAIN-2013-20", 0, args.docs)["text"].combine_chunks()
    for ascii_text, replacement in NON_ASCII.items() if args.non_ascii else ():
        texts = pc.replace_substring(texts, ascii_text, replacement)
    mb = texts.nbytes / 1e6
    print(f"{args.docs} documents, {mb:.1f} MB of text; best of {args.repeat}")
    print("| candidate | CPU s | docs per CPU-s | MB per CPU-s |\n|---|--:|--:|--:|")
    for name, (function, arrow) in CANDIDATES.items():
        if args.only and not any(s in name for s in args.only):
            continue
        try:
            seconds = measure(function, texts if arrow else texts.to_pylist(), args.repeat)
        except ImportError as missing:
            print(f"| {name} | not installed ({missing.name}) | | |")
            continue
        print(f"| {name} | {seconds:.2f} | {args.docs / seconds:,.0f} | {mb / seconds:.1f} |")


if __name__ == "__main__":
    main()
