"""Interference prediction: normalized throughput of jobs sharing one GPU (IASP, IAPP, baselines)."""
