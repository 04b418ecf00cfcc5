"""memory.py: a step's freed arrays given back to the system."""

import pyarrow as pa

from fw_assets.lib.memory import freed_memory_returned


def test_arrow_allocates_from_malloc_within_and_from_its_own_pool_again_after():
    before = pa.default_memory_pool().backend_name
    with freed_memory_returned():
        assert pa.default_memory_pool().backend_name == "system"
        assert pa.array(range(100_000)).sum().as_py() == 4_999_950_000  # allocations work as before
    assert pa.default_memory_pool().backend_name == before
