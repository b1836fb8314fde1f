"""One LightningDataModule per corpus family, the task spec they declare, and corpus files."""
