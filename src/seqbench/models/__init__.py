"""One LightningModule per architecture family; shared behaviour lives in `base.SeqModel`."""
