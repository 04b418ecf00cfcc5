"""The tokenizing stage's contract (fw_assets.tokenizing.contract) as the asset checks of `tokenized`.

The asset computes its contract once, inside its own step, and reports it through
`fw_assets.asset_checks.ContractReport`: check results attached to its materialization, or, if
the blocking check failed, reported on their own before the step fails with nothing published.
"""

from fw_assets.asset_checks import check_specs
from fw_assets.tokenizing.contract import TOKENIZED_CHECKS

TOKENIZED_CHECK_SPECS = check_specs("tokenized", TOKENIZED_CHECKS)
