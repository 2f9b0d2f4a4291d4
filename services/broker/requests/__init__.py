"""The broker's request paths: what a client (producer, consumer, admin, transaction coordinator)
asks a partition leader, from the refusals checked before any partition is touched
(request_checks) to the answer — Produce and ProduceStream with their acks=all waits, Fetch,
FetchStream, fetch sessions and the per-partition read, ListOffsets, DescribeProducers,
DescribeLogDirs (every hosted replica, not only those led),
WriteTxnMarkers, the KIP-890 transaction check, and InitProducerId with this broker's producer id
blocks. A module belongs here when it serves one kind of request; the gRPC adapter that routes
them is servicer.py, one level up.
"""
