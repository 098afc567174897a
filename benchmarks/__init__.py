"""Evaluation harness, calibration and benchmarks over QA fixtures (``reflexrag eval``)."""
