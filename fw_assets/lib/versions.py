"""Code versions: one short hash of everything that decides an asset's output.

An asset declares the SQL statements it runs and the Python modules that decide its bytes (or
whether they are published); the hash covers their text and, for a sampling asset, the policy.
A changed file marks the asset's materializations stale, which is what tells an operator to
re-run the dumps, so a statement or module left out would make old outputs look current
(fw_assets_tests/test_structure.py checks the declarations against the code).
"""

import hashlib
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

from fw_assets.lib.sql import load_sql
from fw_assets.sampling_policy import SamplingPolicy

# The tag that makes an asset observation's value its data version (what the UI compares with the
# versions a run consumed); `dagster` does not export it.
DATA_VERSION_TAG = "dagster/data_version"


def code_version(
    *,
    sql: Sequence[str] = (),
    modules: Sequence[str] = (),
    policy: SamplingPolicy | None = None,
    fingerprint: str = "",
) -> str:
    """`<fingerprint>-<hash>` (or `<hash>` without one) over the named `sql/*.sql` statements and
    the source of the named modules (`fw_assets.tokenizing.tokenize_buckets`); the fingerprint is the
    policy's, or one given (the dedup assets': their MinHash policy's)."""
    digest = hashlib.sha256()
    for name in sorted(set(sql)):
        digest.update(f"sql/{name}\n".encode() + load_sql(name).encode())
    for module in sorted(set(modules)):
        digest.update(f"module/{module}\n".encode() + module_source(module))
    version = digest.hexdigest()[:12]
    fingerprint = policy.fingerprint() if policy else fingerprint
    return f"{fingerprint}-{version}" if fingerprint else version


def module_source(module: str) -> bytes:
    """The source file of an importable module, read without importing it."""
    spec = find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"no source for module {module!r}")
    return Path(spec.origin).read_bytes()
