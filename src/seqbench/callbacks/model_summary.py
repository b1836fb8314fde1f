"""Lightning's Rich model summary, without its FLOPs that read 0, and with the count seqbench knows.

Lightning counts FLOPs by running the model on `example_input_array`, which seqbench's models do not
define (what a batch holds depends on the task), so its FLOPs column and its `Total FLOPs` line read
0 for every model. This summary drops both and, for the families that count them (language models,
`seqbench.nn.flops`), prints the training FLOPs per token the run's `train/flops` is made of.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import RichModelSummary
from lightning.pytorch.utilities.model_summary.model_summary import get_formatted_model_size, get_human_readable_count

RIGHT = {"Params", "Params per Device", "In sizes", "Out sizes"}


class ModelSummary(RichModelSummary):
    def __init__(self, max_depth: int = 1, **summarize_kwargs: Any) -> None:
        super().__init__(max_depth, **summarize_kwargs)
        self._flops_per_token: float | None = None

    def on_fit_start(self, trainer, pl_module) -> None:
        self._flops_per_token = getattr(pl_module, "flops_per_token", lambda: None)()
        super().on_fit_start(trainer, pl_module)

    def summarize(self, summary_data: list[tuple[str, list[str]]], total_parameters: int, trainable_parameters: int,
                  model_size: float, total_training_modes: dict[str, int], total_flops: int,
                  **summarize_kwargs: Any) -> None:
        from rich import get_console
        from rich.table import Table

        columns = [(name, values) for name, values in summary_data if name != "FLOPs"]
        table = Table(header_style=summarize_kwargs.get("header_style", "bold magenta"))
        for name, _ in columns:
            table.add_column(name, justify="right" if name in RIGHT else "left", style="dim" if name == " " else None,
                             no_wrap=name == "Name")
        for row in zip(*(values for _, values in columns)):
            table.add_row(*row)
        grid = Table.grid(expand=True)
        grid.add_column()
        lines = [("Trainable params", get_human_readable_count(int(trainable_parameters))),
                 ("Non-trainable params", get_human_readable_count(int(total_parameters - trainable_parameters))),
                 ("Total params", get_human_readable_count(int(total_parameters))),
                 ("Total estimated model params size (MB)", get_formatted_model_size(model_size)),
                 ("Modules in train mode", total_training_modes["train"]),
                 ("Modules in eval mode", total_training_modes["eval"])]
        if self._flops_per_token:
            lines.append(("Training FLOPs per token (forward + backward, seqbench.nn.flops)",
                          get_human_readable_count(int(self._flops_per_token))))
        for name, value in lines:
            grid.add_row(f"[bold]{name}[/]: {value}")
        console = get_console()
        console.print(table)
        console.print(grid)
