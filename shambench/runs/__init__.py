"""Running a detector: run directories, the prediction journal, sweeps, provenance."""
