"""Samsa's benchmarks: `python -m bench` from the repository root prints every figure side by side
with its baseline, measured in the same run (this machine is shared and noisy)."""
