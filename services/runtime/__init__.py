"""What every Samsa service process shares: the gRPC server (limits, health, reflection,
tracing), structured logging and clean shutdown."""
