"""What tests and benchmarks share: local sites, process wrappers and private servers."""
