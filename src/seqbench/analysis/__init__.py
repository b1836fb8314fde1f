"""Probes and benchmarks that measure the models rather than train them: pipeline speed against a bare
loop, throughput, memory and MFU, gradients, sizes."""
