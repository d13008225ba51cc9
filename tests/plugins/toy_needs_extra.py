"""A plug-in module whose dependency is not installed."""

import jianmu_toy_missing_dependency  # noqa: F401

Sandbox = object
