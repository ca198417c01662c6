"""Scoring: segmentation, the vectorised scorer, metrics, step-level sets, results."""
