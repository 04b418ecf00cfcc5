"""memory.py and fw_assets/__init__.py: what a step frees given back to the system."""

import importlib
import os

import pyarrow as pa

from fw_assets.lib.memory import freed_memory_returned


def test_arrow_allocates_from_malloc_within_and_from_its_own_pool_again_after():
    before = pa.default_memory_pool().backend_name
    with freed_memory_returned():
        assert pa.default_memory_pool().backend_name == "system"
        assert pa.array(range(100_000)).sum().as_py() == 4_999_950_000  # allocations work as before
    assert pa.default_memory_pool().backend_name == before


def test_the_package_has_arrows_allocator_give_freed_pages_back_at_once_in_every_process_it_starts():
    """Set when fw_assets is imported, so inherited by the run and step processes Dagster starts."""
    importlib.import_module("fw_assets")
    assert os.environ["MIMALLOC_PURGE_DELAY"] == "0"
