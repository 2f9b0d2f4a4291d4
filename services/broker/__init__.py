"""The broker: stores and serves partition replicas."""
