"""The fw_assets code location: `dagster dev -w workspace.yaml` or `-m fw_assets.definitions`."""

import warnings

import dagster as dg

# Backfill policies and per-partition check specs are the documented way to get one run per dump
# and per-dump check results; their beta/preview labels are known and accepted here.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

from fw_assets.automation.decide_in_crawl_order import decide_in_crawl_order
from fw_assets.automation.new_dumps import new_dumps
from fw_assets.automation.recipe_inputs import recipe_inputs
from fw_assets.automation.stale_losses import stale_losses
from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.sampled import sampled
from fw_assets.contracts.asset_checks import published_files_check
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.dedup.minhash import minhash
from fw_assets.jobs import probe_losses_job, signing_job
from fw_assets.mixtures.megatron_indexes import megatron_indexes
from fw_assets.mixtures.mixture_inputs import mixture_inputs
from fw_assets.mixtures.mixture_plan import mixture_plan
from fw_assets.mixtures.packed import packed
from fw_assets.probe.probe_loss import probe_loss
from fw_assets.probe.resources import ProbeResource
from fw_assets.resources import FineWebStorage, Warehouse
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized

PUBLISHING = [sampled, bucketed, minhash, deduplicated, tokenized, probe_loss, mixture_plan, megatron_indexes, packed]

defs = dg.Definitions(
    assets=[raw, sampled, bucketed, minhash, band_key_index, deduplicated, tokenized, probe_loss,
            mixture_inputs, mixture_plan, megatron_indexes, packed],
    asset_checks=[published_files_check(asset) for asset in PUBLISHING],
    # Every step of a dump's run already uses all usable cores (DuckDB threads, the tokenizer's
    # process pool): a process per step would only add a Python + Dagster start per step (2x the
    # time of a 1M-document dump, docs/benchmarks.md). Dumps run in parallel as runs.
    executor=dg.in_process_executor,
    jobs=[signing_job, probe_losses_job],
    sensors=[new_dumps, decide_in_crawl_order, stale_losses, recipe_inputs],
    resources={
        "storage": FineWebStorage.from_environment(),
        "warehouse": Warehouse(),
        "tokenizer": TokenizerResource(),
        "probe": ProbeResource.from_environment(),
    },
)
