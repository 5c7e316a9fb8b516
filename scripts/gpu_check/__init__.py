"""The self-check kit: `python3 -m gpu_check --help` (through scripts/gpu-check.sh)."""
