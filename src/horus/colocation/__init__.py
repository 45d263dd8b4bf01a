"""Co-location datasets (measured by ``horus profile colocate``) and their analysis."""
