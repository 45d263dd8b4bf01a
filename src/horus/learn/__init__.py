"""Learned predictors of solo GPU utilization, peak memory and iteration time.

Trained on the project's own profiling measurements (``horus.profiling.schema``) with the model's
graph features (``horus.catalog.FEATURE_NAMES``) plus derived features and the GPU type.
Modules: ``gpus`` (GPU name -> preset), ``features`` (feature schema), ``dataset`` (load + join),
``candidates`` (model registry), ``metrics``, ``evaluation`` (cross-validation protocols),
``training`` (select + fit), ``persistence`` (model directory), ``predictor`` (``"learned"``),
``commands`` (CLI). See docs/predictors.md.
"""
