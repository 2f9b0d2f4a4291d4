"""The record batch: Samsa's unit on disk and on the wire (docs/record-batch.md)."""
