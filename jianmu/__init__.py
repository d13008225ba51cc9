"""Jianmu: a behaviour-tree workflow engine for LLM agents."""
