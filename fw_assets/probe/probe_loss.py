"""`probe_loss`: each kept document's loss under a probe model, one partition per dump.

Per dump, like the steps before it: a dump's losses are computed once and read by every recipe
that draws on the dump, and a new dump costs one new partition, not a re-run of the others. Not in
a dump's signing or deciding runs (group `probe`): the probe is optional and, with a model, the costliest step.
"""

import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg

from fw_assets.contracts.asset_checks import (
    ContractReport,
    Events,
    check_specs,
    unchanged_materialization,
    unchanged_output,
)
from fw_assets.formats.lineage import checked_generation
from fw_assets.lib.disk import SpaceNeed
from fw_assets.lib.markdown import table
from fw_assets.lib.publish import data_version, every_file, input_entry, staged_publication, trusted_record
from fw_assets.lib.versions import code_version
from fw_assets.partitions import dump_partitions
from fw_assets.paths import (
    generation_record_path,
    probe_dir,
    probe_loss_path,
    publication_name,
    recorded_bucket_files,
    token_prefix,
)
from fw_assets.probe.contract import PROBE_CHECKS, check_probe
from fw_assets.probe.probes import ProbeSpec
from fw_assets.probe.resources import ProbeResource
from fw_assets.probe.scoring import (
    STEPS_SQL,
    BucketDocuments,
    BucketLosses,
    score_with_bigrams,
    score_with_model,
    tiktoken_byte_lengths,
)
from fw_assets.resources import FineWebStorage, Warehouse
from fw_assets.run_health import TOKENIZER_POOL, asset_code_version, heavy_slot, writing_step
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.tokenizing.tokenized import tokenized

SQL = STEPS_SQL
MODULES = (*(f"fw_assets.probe.{name}" for name in ("ngram", "probes", "scoring", "causal_lm", "batching",
                                                    "device_memory", "prefetch", "contract")),
           "fw_assets.formats.probe_losses")


def _configured_fingerprint() -> str:
    """The probe configured in the environment, so that changing it marks its losses stale. A
    model directory that cannot be read is refused when the asset runs, not here."""
    try:
        return ProbeResource.from_environment().spec().fingerprint()
    except ValueError:
        return "unreadable-probe"


FINGERPRINT = _configured_fingerprint()
SPACE = SpaceNeed(0, "under 100 bytes per document")


PROBE_LOSS_CHECK_SPECS = check_specs("probe_loss", PROBE_CHECKS)


@dg.asset(
    partitions_def=dump_partitions,
    group_name="probe",
    deps=[tokenized],
    code_version=code_version(sql=SQL, modules=MODULES, fingerprint=FINGERPRINT),
    kinds={"numpy", "parquet"},
    check_specs=PROBE_LOSS_CHECK_SPECS,
    description="Each kept document's loss under a probe model: `probe/<probe>/<bucket>/<dump>.parquet` "
    "(id, tokens, loss in nats per token, bits_per_byte, truncated), row i = document i of the "
    "bucket's token files. Probe: built-in Kneser-Ney bigram (default) or a local causal LM "
    "(FW_PROBE_MODEL_DIR).",
)
def probe_loss(
    context: dg.AssetExecutionContext, storage: FineWebStorage, warehouse: Warehouse, probe: ProbeResource
) -> Events:
    dump, root, log = context.partition_key, storage.output_root, context.log.info
    try:
        spec = probe.spec()
        identity = spec.identity()
    except ValueError as error:
        raise dg.Failure(f"Dump {dump}: {error}") from error
    started = time.monotonic()
    name = publication_name("probe_loss", spec.name, dump)
    tokens_name = publication_name("tokenized", probe.tokenizer, dump)
    bucketed_name = publication_name("bucketed", dump)
    with writing_step(context, root, SPACE):
        now = _inputs(dump, probe.tokenizer, trusted_record(root, tokens_name), trusted_record(root, bucketed_name))
        if unchanged := unchanged_output(context, root, name, now):
            yield unchanged_materialization(unchanged, PROBE_CHECKS)
            return
        with (
            heavy_slot(context, root, TOKENIZER_POOL),
            staged_publication(root, name, dump, log, code_version=asset_code_version(context)) as staging,
            # every document's tokens are scored: the token files are read whole
            checked_generation(root, tokens_name, dump, log, verified=every_file) as tokens,
            checked_generation(root, bucketed_name, dump, log) as bucketed_record,
        ):
            buckets = _bucket_documents(root, dump, probe.tokenizer, tokens, bucketed_record, staging.path)
            total = sum(tokens["contents"]["documents"].values())
            log(f"Scoring {dump} ({total:,} documents in {len(buckets)} buckets) with probe {spec.name}")
            written, reference = _score(
                spec, buckets, tokens["contents"]["tokenizer"], warehouse, staging.path, dump, log
            )
            report = ContractReport(
                dump, "probe_loss", check_probe({b.name: (b.prefix, b.output) for b in buckets})
            )
            yield from report.refuse_if_blocked()
            contents = {
                "probe": {**identity, **({"reference_sha256": reference} if reference else {})},
                "documents": {b: w.documents for b, w in written.items()},
                "truncated": {b: w.truncated for b, w in written.items()},
            }
            published = staging.publish(
                _moves(root, spec.name, dump, buckets, written), contents,
                inputs=_inputs(dump, probe.tokenizer, tokens, bucketed_record),
            )
    metadata = _metadata(written, contents["probe"], time.monotonic() - started, probe_dir(root, spec.name))
    yield report.materialization(metadata, data_version(published))


def _inputs(dump: str, tokenizer: str, tokens: dict | None, bucketed_record: dict | None) -> dict:
    """What a publication of the dump's losses records it was made from: the documents scored are
    the token files'; the model probe reads their texts."""
    return {
        publication_name("tokenized", tokenizer, dump): input_entry(
            tokens, **({"tokenizer": tokens["contents"]["tokenizer"]} if tokens else {})
        ),
        publication_name("bucketed", dump): input_entry(bucketed_record),
    }


def _bucket_documents(
    root: Path, dump: str, tokenizer: str, tokens: dict | None, bucketed_record: dict | None, staging: Path
) -> list[BucketDocuments]:
    """The buckets whose token files hold documents, with their texts and staged loss file."""
    if tokens is None or bucketed_record is None:
        missing = ("tokenized", tokenizer, dump) if tokens is None else ("bucketed", dump)
        record = generation_record_path(root, publication_name(*missing))
        raise dg.Failure(
            f"Dump {dump}: {missing[0]} was never published for this dump (tokenizer {tokenizer}; no "
            f"generation record at {record}). Materialize `tokenized` for this dump first; nothing was published."
        )
    texts = recorded_bucket_files(root, bucketed_record)
    return [
        BucketDocuments(
            bucket, token_prefix(root, tokenizer, bucket, dump), staging / bucket / f"{dump}.parquet", texts[bucket][1]
        )
        for bucket, documents in tokens["contents"]["documents"].items()
        if documents
    ]


def _score(
    spec: ProbeSpec, buckets: list[BucketDocuments], tokenizer: dict, warehouse: Warehouse, staging: Path, dump: str,
    log: Callable[[str], None],
) -> tuple[dict[str, BucketLosses], str]:
    """Each bucket's losses, and the built-in probe's reference digest ('' for a model)."""
    if spec.is_builtin:
        if tokenizer["kind"] != "tiktoken":
            raise dg.Failure(
                f"Dump {dump}: the built-in probe reads tiktoken token files, but {tokenizer['name']} is a "
                f"{tokenizer['kind']} tokenizer. Configure the probe's tokenizer or a model directory; "
                "nothing was published."
            )
        byte_lengths = tiktoken_byte_lengths(tokenizer["name"], tokenizer["vocab_size"])
        return score_with_bigrams(buckets, tokenizer["vocab_size"], tokenizer["eod_id"], byte_lengths)
    from fw_assets.probe.causal_lm import CausalLM, NotAModel

    try:
        model = CausalLM(spec)
    except NotAModel as error:
        raise dg.Failure(f"Dump {dump}: {error}") from error
    with warehouse.connect(staging) as con:
        return score_with_model(con, buckets, model, log, dump), ""


def _moves(
    root: Path, probe: str, dump: str, buckets: list[BucketDocuments], written: dict[str, BucketLosses]
) -> dict[Path, Path | None]:
    """Each bucket's loss file onto its published path; a bucket without documents has none (an
    older file of it is removed)."""
    staged = {b.name: b.output for b in buckets if b.name in written}
    return {probe_loss_path(root, probe, b.name, dump): staged.get(b.name) for b in SEED_POLICY.buckets}


def _metadata(written: dict[str, BucketLosses], identity: dict, seconds: float, folder: Path) -> dict:
    documents = sum(w.documents for w in written.values())
    rows = [(b, w.documents, w.tokens, w.truncated, round(w.seconds, 2)) for b, w in written.items()]
    return {
        "dagster/row_count": documents,
        "documents": documents,
        "tokens_scored": sum(w.tokens for w in written.values()),
        "truncated_documents": sum(w.truncated for w in written.values()),
        "seconds": round(seconds, 2),
        "documents_per_second": round(documents / max(seconds, 1e-9)),
        "probe": dg.MetadataValue.json(identity),
        "folder": dg.MetadataValue.path(str(folder)),
        "buckets": dg.MetadataValue.md(table(["bucket", "documents", "tokens scored", "truncated", "seconds"], rows)),
    }
