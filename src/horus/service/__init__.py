"""The live service: `horus serve` (API, store, scheduler) and its CLI verbs (docs/service.md)."""
