"""The Python SDK: Producer, Consumer and Admin (built in the cluster issue)."""
