"""Where examples come from: adapter base, benchmark loading, downloads, evidence (context providers)."""
