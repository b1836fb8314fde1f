"""Probes and benchmarks that measure the models rather than train them (throughput, memory, MFU)."""
