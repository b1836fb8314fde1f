"""`matmul_precision`: a GPU run that joins CPU runs in one comparison computes in fp32, as they do."""

import torch
from conftest import compose_cfg

from seqbench.training.run import set_matmul_precision


def test_highest_keeps_cudnn_in_fp32_too():
    # bug caught: "highest" set through torch.set_float32_matmul_precision alone, which leaves cuDNN's
    # recurrent and convolution kernels in TF32 (torch's default): a GPU LSTM run joining CPU runs in the
    # transfer check would compute in 10-bit mantissas while the page says fp32
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        set_matmul_precision("highest")
        assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cudnn.allow_tf32
        set_matmul_precision("high")
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


def test_the_precision_comes_from_the_environment_and_not_from_an_override(monkeypatch, tmp_path):
    # bug caught: the GPU session setting fp32 by a command-line override, which enters every job's archive
    # key (seqbench.protocol.sweep_archive) and so misses the jobs the CPU chain has queued or finished
    assert compose_cfg(["model=lstm", "data=ptb"], tmp_path).matmul_precision == "high"
    monkeypatch.setenv("SEQBENCH_MATMUL_PRECISION", "highest")
    assert compose_cfg(["model=lstm", "data=ptb"], tmp_path).matmul_precision == "highest"
