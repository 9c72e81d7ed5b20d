"""Evaluation: the A/B harness, suites, metrics, reports, the TTFT bench and calibration."""
