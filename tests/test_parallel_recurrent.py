"""The parallel-recurrence families (minGRU, minLSTM, the selective SSM) as LightningModules: the step
form the generator runs predicts what the parallel form trains, the truncated-BPTT stream carries the
state as the recurrent family's does, and the bidirectional encoder reads a padded row as it reads
the row alone. (Training from `model=X data=Y`: tests/test_matrix_pairs.py; resume: test_resume.py;
FLOPs: test_flops.py; the layers against their step loops: test_min_rnn.py, test_ssm.py.)"""

from __future__ import annotations

import functools

import pytest
import torch

from seqbench.data.spec import TaskSpec
from seqbench.families import FAMILIES
from seqbench.models.parallel_recurrent import ParallelRecurrentModel

PARALLEL = [name for name, family in FAMILIES.items() if family.cls is ParallelRecurrentModel]
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)
V = 50


def model_for(family: str, task: str = "lm", **options) -> ParallelRecurrentModel:
    torch.manual_seed(0)
    spec = TaskSpec(task, vocab_size=V, num_classes=5, pad_id=0)
    return ParallelRecurrentModel(spec, ADAM, **FAMILIES[family].selector, d_model=32, num_layers=2,
                                  **options).eval()


@pytest.mark.parametrize("family", PARALLEL)
def test_the_step_forms_next_token_distribution_is_the_parallel_forms(family):
    """float32, 512 tokens: each step's softmax equals the parallel read's at that position (1e-5)."""
    model = model_for(family)
    tokens = torch.randint(V, (2, 512))
    with torch.no_grad():
        parallel = model.net(tokens)[0].softmax(-1)  # (B, T, V)
        state, stepped = None, []
        for t in range(tokens.size(1)):
            logits, state = model.net.step(tokens[:, t], state)
            stepped.append(logits.softmax(-1))
    torch.testing.assert_close(torch.stack(stepped, 1), parallel, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", PARALLEL)
def test_greedy_generation_continues_the_prompt_as_the_parallel_form_reads_it(family):
    model = model_for(family)
    out = model.generate(torch.randint(V, (2, 7)), max_new_tokens=20, temperature=0.0)  # (2, 27)
    with torch.no_grad():
        greedy = model.net(out)[0].argmax(-1)  # (2, 27): each position's likeliest next token
    assert torch.equal(out[:, 7:], greedy[:, 6:-1])


@pytest.mark.parametrize("family", PARALLEL)
def test_the_stream_carries_the_state_across_windows_and_window_0_resets_it(family):
    model = model_for(family)
    tokens = torch.randint(V, (3, 24))
    with torch.no_grad():
        whole = model.lm_logits({"input": tokens, "window": 0}, "val")
        first = model.lm_logits({"input": tokens[:, :10], "window": 0}, "val")
        second = model.lm_logits({"input": tokens[:, 10:], "window": 1}, "val")
        torch.testing.assert_close(torch.cat([first, second], 1), whole, rtol=0, atol=1e-5)
        again = model.lm_logits({"input": tokens[:, 10:], "window": 0}, "val")  # a new stream: zero state
        torch.testing.assert_close(again, model.net(tokens[:, 10:])[0], rtol=0, atol=0)


@pytest.mark.parametrize("family", PARALLEL)
def test_a_bidirectional_encoder_reads_a_padded_row_as_the_row_alone(family):
    """Both directions: padding after a row's end changes none of its states and not its summary."""
    model = model_for(family, "tagging", bidirectional=True)
    row = torch.randint(1, V, (1, 6))
    row_padded = torch.cat([row, torch.zeros(1, 4, dtype=torch.long)], 1)
    padded = torch.cat([row_padded, torch.randint(1, V, (1, 10))])
    lengths = torch.tensor([6, 10])
    with torch.no_grad():
        alone, _ = model.encoder(row)
        batched, _ = model.encoder(padded, lengths)
        torch.testing.assert_close(batched[:1, :6], alone, rtol=0, atol=1e-5)
        summary = model.encoder.summary(padded, lengths, "last")[:1]
        torch.testing.assert_close(summary, model.encoder.summary(row, None, "last"), rtol=0, atol=1e-5)
    d = alone.size(-1) // 2  # the right-to-left half reads the row's last token first
    torch.testing.assert_close(summary[:, d:], alone[:, 0, d:], rtol=0, atol=1e-5)
