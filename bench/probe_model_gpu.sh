#!/usr/bin/env bash
# The GPU rows of docs/benchmarks.md ("The model probe on a device"), in one shot: bench.probe_model
# on the first CUDA device, GPT-2 small and a 1.1B Llama, every variant (about 6 to 8 minutes on one
# H100, the models built and compiled included). Run from the repository root:
#
#     bash bench/probe_model_gpu.sh            # PYTHON=... to choose the interpreter
#
# The table goes to stdout and to $OUT/probe_model_gpu.md (OUT defaults to bench/results), the
# machine's description beside it. Needs a CUDA build of torch, transformers 5, tokenizers,
# safetensors, numpy, pyarrow, duckdb and psutil (pip install -e '.[probe,bench]' with torch's CUDA
# wheel); checked first, and a missing one named. Stops at 480 s, keeping the rows measured by then.
set -euo pipefail

python=${PYTHON:-python3}
out=${OUT:-bench/results}
mkdir -p "$out"
report="$out/probe_model_gpu.md"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export TOKENIZERS_PARALLELISM=true  # the reading thread encodes with every core

"$python" - <<'EOF'
import importlib.util, sys
missing = [m for m in ("torch", "transformers", "tokenizers", "safetensors", "numpy", "pyarrow", "duckdb", "psutil")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"missing: {', '.join(missing)} (pip install -e '.[probe,bench]' with torch's CUDA wheel)")
import torch, transformers
if not torch.cuda.is_available():
    sys.exit(f"torch {torch.__version__} sees no CUDA device: nothing to measure here")
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), transformers {transformers.__version__}, "
      f"{torch.cuda.get_device_name(0)}")
EOF

{
    echo "# bench.probe_model on $(hostname), $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>/dev/null || true
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores"
    echo
} | tee "$report"

status=0
timeout --signal=INT 480 "$python" -m bench.probe_model --work "${TMPDIR:-/tmp}" 2>&1 \
    | grep -v -e '^Loading weights' -e '^Writing model shards' | tee -a "$report" || status=$?
echo "exit status $status; the table is in $report"
exit "$status"
