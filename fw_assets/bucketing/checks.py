"""The bucketing stage's contracts as per-dump asset checks of raw, sampled and bucketed.

Each asset computes its contract once, inside its own step, and reports it through
`fw_assets.asset_checks.ContractReport`: check results attached to its materialization, or, if a
blocking check failed, reported on their own before the step fails with nothing published.
"""

from fw_assets.asset_checks import check_specs
from fw_assets.contracts.bucketed import BUCKETED_CHECKS
from fw_assets.contracts.raw import RAW_CHECKS
from fw_assets.contracts.selection import SELECTION_CHECKS

RAW_CHECK_SPECS = check_specs("raw", RAW_CHECKS)
SAMPLED_CHECK_SPECS = check_specs("sampled", SELECTION_CHECKS)
BUCKETED_CHECK_SPECS = check_specs("bucketed", BUCKETED_CHECKS)
