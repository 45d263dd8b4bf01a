"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` beside the checkout; tests using it skip when it is absent (a user's fresh machine)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared reference data not found at {SHARED_DATA} (only present on the project's machines)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def gavel_path(shared_data: Path) -> Path:
    path = shared_data / "gavel" / "simulation_throughputs.json"
    if not path.is_file():
        pytest.skip(f"Gavel throughputs not found at {path}")
    return path
