"""The broker: stores and serves partition replicas.

Grouped by subject: `requests/` answers clients, `replica/` moves records between a partition's
replicas, `metadata/` follows the cluster metadata, `log/` stores one partition. What composes the
broker or is shared by all of them stays here: broker.py, main.py, servicer.py, partition_host.py,
the config, the background maintenance and scrubber, metrics and record traces.
"""
