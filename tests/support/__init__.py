"""Helpers shared by tests: a fake OpenAI-compatible server."""
