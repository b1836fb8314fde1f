"""Stand-ins for tests: a DataModule posing a task the recurrent family has no method for (translation
belongs to the encoder-decoder families)."""

import lightning as L


class FakeTranslationData(L.LightningDataModule):
    task = "translation"

    def __init__(self, data_dir: str = "", batch_size: int = 1, eval_batch_size: int = 1, bptt: int = 1,
                 download: bool = True, eval_stride: int | None = None, seed: int = 0):
        super().__init__()
