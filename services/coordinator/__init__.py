"""The coordinator service: consumer groups (and later transactions), state in internal topics on
the brokers."""
