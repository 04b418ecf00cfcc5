"""`band_key_index`: the sorted band keys and the signatures of a signed dump,
`minhash/<dump>.keys.arrow` and `minhash/<dump>.signatures.arrow`, as the dumps decided later see them.

The last asset of a dump's signing run. It writes nothing: `minhash` published the files, and this
step verifies their content against `minhash`'s generation record and materializes their content
version as its data version, the same for an identical re-sign. `deduplicated` of every strictly
later dump depends on it (fw_assets.dedup.band_key_lineage.later_dumps), so Dagster knows what a
decision reads: the lineage shows it, a dump's decisions wait while an earlier dump's signing is
queued or under way (their automation condition), and a changed earlier dump marks them stale.
"""

import dagster as dg

from fw_assets.dedup.band_key_lineage import BAND_KEY_INDEX, ReplacedMinhashFiles, verified_content_version
from fw_assets.dedup.minhash import minhash
from fw_assets.dedup.signature_files import MinhashFileError
from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.versions import code_version
from fw_assets.partitions import PER_DUMP
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.resources import FineWebStorage
from fw_assets.run_health import pass_step_fence

SQL = ()
MODULES = ("fw_assets.dedup.band_key_lineage", "fw_assets.dedup.content_versions")


@dg.asset(
    key=BAND_KEY_INDEX,
    **PER_DUMP,
    deps=[minhash],
    code_version=code_version(sql=SQL, modules=MODULES),
    description="The band keys of a dump's documents sorted by key and their signatures, "
    "`minhash/<dump>.keys.arrow` and `minhash/<dump>.signatures.arrow`, written by `minhash` and read "
    "by `deduplicated` of every later dump. Its data version is their content version: an identical "
    "re-sign changes nothing downstream.",
)
def band_key_index(context: dg.AssetExecutionContext, storage: FineWebStorage) -> dg.MaterializeResult:
    dump, root = context.partition_key, storage.output_root
    name = publication_name("minhash", dump)
    with checked_generation(root, name, dump, context.log.info) as record:
        if record is None:
            raise dg.Failure(
                f"Dump {dump}: minhash was never published (no generation record at "
                f"{generation_record_path(root, name)}); materialize it first."
            )
        try:
            version = verified_content_version(root, dump, record)
        except (MinhashFileError, ReplacedMinhashFiles) as error:
            raise dg.Failure(f"Dump {dump}: {error}. Materialize minhash of {dump} again.") from error
    pass_step_fence(context, f"reporting band_key_index of {dump}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "content_version": version,
            "minhash_generation": record["generation"],
            "documents": record["contents"]["documents"],
        },
    )
