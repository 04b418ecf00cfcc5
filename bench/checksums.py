"""What checksumming published files costs: xxh3-128 of bytes in memory (what the token files'
writer adds to each byte it writes), of a file read back from the page cache (what a publication
pays for every other file, and a reader for each file it verifies), and, for scale, writing the
same bytes through the token files' writer (its checksum included).

    python -m bench.checksums [--gib 1] [--folder DIR]

Prints one line per measure, after the machine; the file is deleted afterwards.
"""

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.suite import machine
from fw_assets.lib.checksums import file_checksum, new_checksum
from fw_assets.lib.write_behind import WriteBehindFile

PIECE_BYTES = 16 * 2**20
REPEATS = 3


def _fastest(run) -> float:
    """The fastest of REPEATS runs, in seconds."""
    seconds = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.checksums")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--folder", type=Path, default=None, help="where the file is written (default: a temp folder)")
    args = parser.parse_args()
    pieces = int(args.gib * 2**30) // PIECE_BYTES
    piece = memoryview(np.random.default_rng(0).integers(0, 2**31, PIECE_BYTES // 4, dtype=np.int32))
    host = machine()
    print(f"Machine: {host['cpu_model']}, {host['cores']} cores, {host['memory_gib']} GiB")

    def hash_in_memory() -> None:
        digest = new_checksum()
        for _ in range(pieces):
            digest.update(piece)
        digest.hexdigest()

    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        path = Path(folder) / "tokens.bin"

        def write_behind() -> None:
            writer = WriteBehindFile(path)
            for _ in range(pieces):
                writer.write(piece)
            writer.close()

        hashing, writing = _fastest(hash_in_memory), _fastest(write_behind)
        with open(path, "wb") as stream:  # written as usual: it stays in the page cache
            for _ in range(pieces):
                stream.write(piece)
        reading = _fastest(lambda: file_checksum(path))
    gib = pieces * PIECE_BYTES / 2**30
    print(f"xxh3-128 of bytes in memory: {gib / hashing:.1f} GiB/s ({hashing:.2f} s for {gib:.1f} GiB)")
    print(f"xxh3-128 of a file read back from the page cache: {gib / reading:.1f} GiB/s ({reading:.2f} s)")
    print(f"writing the {gib:.1f} GiB through WriteBehindFile, its checksum included: {writing:.2f} s")


if __name__ == "__main__":
    main()
