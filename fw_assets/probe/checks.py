"""The probe stage's contract (fw_assets.probe.contract) as the asset checks of `probe_loss`,
reported through fw_assets.asset_checks.ContractReport like every other stage's."""

from fw_assets.asset_checks import check_specs
from fw_assets.probe.contract import PROBE_CHECKS

PROBE_LOSS_CHECK_SPECS = check_specs("probe_loss", PROBE_CHECKS)
