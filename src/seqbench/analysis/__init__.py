"""Probes and benchmarks: pipeline speed against a bare loop, throughput, gradients, sizes."""
