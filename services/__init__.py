"""Samsa's services: controller, broker and coordinator (later issues), each a pure core plus thin
drivers and gRPC adapters."""
