"""The mixture contracts as per-recipe asset checks of `mixture_plan` and `megatron_indexes`.

Each asset computes its contract (`fw_assets.mixtures.contract`) once, inside its own step, and
reports it through `fw_assets.asset_checks.ContractReport`.
"""

from fw_assets.asset_checks import check_specs
from fw_assets.mixtures.contract import CURRICULUM_CHECKS, INDEX_CHECKS, PLAN_CHECKS, REWEIGHT_CHECKS
from fw_assets.mixtures.partitions import recipe_partitions

MIXTURE_PLAN_CHECK_SPECS = check_specs("mixture_plan", PLAN_CHECKS + CURRICULUM_CHECKS + REWEIGHT_CHECKS, recipe_partitions)
MEGATRON_INDEXES_CHECK_SPECS = check_specs("megatron_indexes", INDEX_CHECKS, recipe_partitions)
