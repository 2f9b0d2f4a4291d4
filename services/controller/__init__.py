"""The controller quorum: the Raft-replicated metadata log and the decisions on it."""
