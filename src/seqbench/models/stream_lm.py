"""What the stateful language models share: the recurrent family and the parallel recurrences.

A family subclasses `StreamLM` when on `lm` it reads contiguous streams in truncated-BPTT windows
(`lm_batching = "stream"`) with a state carried from window to window: Lightning's LSTM demo and the
word_language_model example. Its `self.net` maps tokens (B, T) and a state (None: zeros) to logits
(B, T, V) and the new state, and `self.net.last_logits(tokens, state)` to the last position's logits
(B, V) and the new state. Here, once:

- the state lives on the module, one per stage, detached after every window and reset when a stream
  starts again (window 0), so a validation pass in the middle of an epoch leaves the training stream
  as it was;
- the analyses' reads (`next_token_logits` from a zero state, `read_on` continuing a stream);
- the training state in checkpoints, so a resumed run continues the stream bit for bit. Under DDP each
  rank holds the state of its own rows (its shard of the stream): they are gathered along the state's
  batch dimension (`state_batch_dim`: 1 for `nn.LSTM`'s (L, B, H), 0 for the batch-first states of the
  parallel stack) on save and sliced back on load, which also lets a run resume on another number of
  processes.
"""

from __future__ import annotations

import torch

from seqbench.models.base import SeqModel
from seqbench.nn.recurrent_lm import detach_state, map_state


class StreamLM(SeqModel):
    lm_batching = "stream"
    #: the dimension of every state tensor that holds the batch's rows
    state_batch_dim = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._state: dict[str, object] = {}

    #: `lm_logits` takes `positions`: the output layer at the scored positions alone (`seqbench.nn.positions_scored`)
    head_at_positions = True

    def lm_logits(self, batch: dict, stage: str, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (B, T, V) of the batch's window, or (N, V) at the N True `positions` (B, T); the state
        carries on to the stage's next window either way."""
        tokens = batch["input"]
        state = None if batch.get("window", 0) == 0 else self._state.get(stage)
        state = map_state(lambda s: s.to(tokens.device), state)  # a resumed state arrives on the CPU
        logits, state = self.net(tokens, state, positions=positions)
        self._state[stage] = detach_state(state)
        return logits

    def next_token_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, V) of the next token, read from a zero state: the model knows
        exactly these T tokens (`seqbench.analysis.context_usage`)."""
        return self.net.last_logits(tokens)[0]

    def window_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) -> logits (B, T, V) at every position, read from a zero state: position i has
        read exactly i + 1 tokens (`seqbench.analysis.window_position`)."""
        return self.net(tokens)[0]

    def read_on(self, tokens: torch.Tensor, state=None) -> tuple[torch.Tensor, object]:
        """Continue reading a stream from `state`: tokens (B, T) -> next-token logits (B, V) and the new
        state, so one pass over a split scores chosen positions with everything before them."""
        return self.net.last_logits(tokens, state)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        state, dim = self._state.get("train"), self.state_batch_dim
        if state is not None and self.trainer is not None and self.trainer.world_size > 1:
            state = map_state(lambda s: torch.cat(list(self.all_gather(s)), dim=dim), state)
        checkpoint["train_state"] = map_state(lambda s: s.cpu(), state)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        state = checkpoint.get("train_state")
        if state is not None and self._trainer is not None and self.trainer.world_size > 1:
            rank, world, dim = self.trainer.global_rank, self.trainer.world_size, self.state_batch_dim
            state = map_state(lambda s: s.chunk(world, dim=dim)[rank].clone(), state)
        self._state["train"] = state
