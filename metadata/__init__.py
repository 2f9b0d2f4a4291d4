"""The cluster metadata state machine (KRaft-style): pure, fed by an ordered log of records."""
