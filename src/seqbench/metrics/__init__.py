"""Metrics torchmetrics does not have: entity-level precision/recall/F1 the way conlleval scores it."""
