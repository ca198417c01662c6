"""What API-backed detectors share: the OpenAI-compatible client, response cache, prices, batches."""
