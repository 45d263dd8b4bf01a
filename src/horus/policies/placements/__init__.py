"""Placements registered in ``PLACEMENTS`` (module name = placement name)."""
