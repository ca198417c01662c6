"""Showing results: tables, figures, highlighted examples, analyses, comparisons, the LLM judge."""
