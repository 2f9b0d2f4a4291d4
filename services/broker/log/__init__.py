"""The partition log: one partition's storage engine (DESIGN.md §3).

Pure cores (no I/O): config, offset_index, time_index, segment_index, recovery, framing,
append_info, leader_epoch, checkpoint_format, policy, compaction, producer_state (idempotent
producers' epochs and last batches; producer_entry, one producer's), transaction_index, and
retention (which only calls methods on the segments `Log` hands it). I/O drivers: segment (one
segment's files), cleaner (a compaction pass: it reads segments through its own descriptors, on any
thread, and writes their cleaned copies), transaction_log_state (the `.txnindex` files),
checkpoint_file (atomic small files), loading (a log read back from disk and recovered),
producer_snapshots (producer-state snapshot files and the replay from segments), producer_log_state
(the producer state beside a log, fed by it), producer_transactions (the producer state and the
`.txnindex` files, fed together), log_durability (a log's recovery point, flushes, checkpoints and
clean-shutdown marker), local_log (a log's segments, through their methods: reads, appends and
rolls, truncation, deletion), log_truncation (truncating a log's tail and deleting its front,
crash-safely), log_compaction (when a compaction pass is due, planning it and swapping it in), log
(the `Log` composing it all).

The package re-exports nothing: import each module by its own name.
"""
