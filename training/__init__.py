"""Trainers: one shared loop (`training.loop`), one Task per model, `python -m training.<name>`."""
import os as _os

# Set before torch loads (see cir_core/__init__.py): spinning OpenMP threads collapse throughput
# on shared cores.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
