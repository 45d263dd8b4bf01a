"""Node agent: runs the jobs the server places on the GPUs of its machine (docs/service.md)."""
