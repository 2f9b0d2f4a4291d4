"""Replication between a partition's replicas: the leader's pure view of its followers and the
high watermark (replication), its ISR upkeep towards the controller (isr_manager), the follower
fetching from its leader (replica_fetcher), the leader's side of a follower's fetch stream
(replica_stream), and the high-watermark checkpoint a restarted broker starts from. A module
belongs here when it moves records or progress between replicas, not between a broker and a
client.
"""
