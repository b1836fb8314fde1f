"""Stand-ins for tests: a DataModule posing a task the recurrent LM family has no method for."""

import lightning as L


class FakeImageData(L.LightningDataModule):
    task = "image"

    def __init__(self, data_dir: str = "", batch_size: int = 1, eval_batch_size: int = 1, bptt: int = 1,
                 download: bool = True, eval_stride: int | None = None, seed: int = 0):
        super().__init__()
