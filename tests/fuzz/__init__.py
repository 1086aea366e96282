"""Property-based tests (Hypothesis) and the long fuzz run (`python -m tests.fuzz`): see docs/robustness.md."""
