"""Computation-graph features of training workloads (needs torch; optional for the simulator).

``extract_features`` (PyTorch models, via ``torch.export`` + ``FlopCounterMode`` under
``FakeTensorMode``) and ``extract_onnx_features`` (ONNX files) produce the
``horus.catalog.FEATURE_NAMES`` vector. Import the submodules directly: this package does not import torch.
"""
