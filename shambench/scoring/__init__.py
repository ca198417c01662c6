"""Scoring: segmentation, span arithmetic, the vectorised scorer, metrics, step-level sets, results."""
