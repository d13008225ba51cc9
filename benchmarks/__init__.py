"""Side-by-side benchmarks; `make bench` runs them all (`python -m benchmarks`)."""
