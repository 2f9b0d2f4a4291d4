"""Every bound Samsa enforces, in one place, named noun-first with the unit last.

Each limit says why it is what it is. The relations between them are asserted at import, so an
edit that makes them incoherent (a maximal batch that no longer fits in a gRPC message) fails at
once rather than in production. Configurable settings (Kafka's `max.message.bytes`, …) are checked
against these hard ceilings when they are parsed.
"""

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# --- record batches --------------------------------------------------------------------------

# The largest stored batch (header + records section, compressed size). Kafka's default
# `message.max.bytes` is ~1 MiB and operators raise it to tens of MiB for large payloads; 64 MiB
# covers those while keeping one batch comfortably inside one gRPC message.
batch_bytes_max = 64 * MIB

# The largest records section after decompression. A zstd frame can expand a few KiB into GiBs (a
# "zip bomb"); the decoder refuses to allocate more than this, whatever the frame header claims.
batch_uncompressed_bytes_max = 128 * MIB

# Kafka's default for `max.message.bytes` (1 MiB + the 12-byte log overhead).
max_message_bytes_default = 1 * MIB + 12

# --- topics and partitions ---------------------------------------------------------------------

# Kafka's limit: a topic name becomes part of a directory name (`<topic>-<partition>`), and 249
# leaves room for the partition suffix inside a 255-byte file name.
topic_name_length_max = 249

# The most replicas a reassignment's target list may name (Kafka bounds it only by the broker
# count); real clusters use 3 to 5. While it runs a partition holds the target and the replicas
# it removes, up to twice this; each id costs at most 5 bytes in each of `replicas`, `isr`, the
# ELR and the adding or removing list, so a described partition stays inside
# describe_topics_partition_bytes_max and its records inside alter_partition_record_bytes_max.
replication_factor_max = 50

# --- consumer groups ----------------------------------------------------------------------------

# The longest group id (coordinator.proto): a group id is a key of every record the coordinator
# writes to __consumer_offsets and is hashed on every FindCoordinator; 255 characters is far
# beyond any real name and keeps those records small.
group_id_length_max = 255

# The largest ConsumerGroupHeartbeat (serialized). Its client id, instance id and subscription are
# written whole into the member's record in __consumer_offsets, one write that is never split: a
# record over the topic's max.message.bytes (1 MiB) is refused by the broker and fails every group
# of the partition (it is loaded again, and the client's retry fails it again). A heartbeat that
# owns every partition of a 10,000-partition cluster, or subscribes to 1,000 topics by name, is
# under 100 KiB; a larger subscription is better made by regex.
group_heartbeat_request_bytes_max = 256 * KIB

# An OffsetCommit's records are written as one batch of __consumer_offsets, which must fit the
# topic's max.message.bytes, or the broker refuses it and fails the writer of the whole partition.
# The coordinator refuses a commit over this bound (group_offsets.commit_size_problem; it builds
# the batch to be exact only past the bound), and the SDKs split commits to stay under it:
#   offset_commit_batch_overhead_bytes + group id bytes
#     + per partition (group id + topic name + metadata bytes
#                      + offset_commit_record_overhead_bytes_max)
#   <= offset_commit_batch_bytes_max
# (UTF-8 bytes). The clients/node/group.js copies these numbers. A record's share beyond its
# group id, topic and metadata is at most 94 bytes measured (every field at its largest, the
# names and metadata too, whose lengths take more bytes; its topic id, KIP-516, 18 of them); the
# overhead is the batch's header and the record of a group the commit creates.
offset_commit_record_overhead_bytes_max = 96
offset_commit_batch_overhead_bytes = 1024
offset_commit_batch_bytes_max = max_message_bytes_default

# --- transactions -------------------------------------------------------------------------------

# The longest transactional id (transactions.proto, coordinator.proto): like a group id, it is the
# key of every record the transaction coordinator writes to __transaction_state and is hashed on
# every FindCoordinator; Kafka sets no bound, and 255 characters (a group id's) is far beyond any
# real name and keeps those records small.
transactional_id_length_max = 255

# The highest producer epoch: Kafka's is an int16. A producer that would pass it takes a new
# producer id at epoch 0 (KIP-360). A coordinator partition's owner writes with its assignment
# epoch as producer epoch, so the controller rotates the partition's producer id before its
# epoch reaches this one, which is kept for fencing the retired id (coordinator_control.py).
producer_epoch_max = 2**15 - 1

# --- coordinator topics ---------------------------------------------------------------------------

# The most bytes one CoordinatorAssignmentRecord takes in a metadata batch: six varint fields
# (at most 55 bytes with their tags; -1 takes ten bytes), the topic name (21 bytes for
# "__transaction_state") and the record's framing: 78 bytes at worst, with room to spare. All
# partitions of both coordinator topics (__consumer_offsets and __transaction_state) must change
# owner in one batch when the last coordinator but one dies.
coordinator_assignment_record_bytes_max = 96

# --- segments and indexes --------------------------------------------------------------------

# Offset-index entries store a 32-bit position and a 32-bit offset relative to the segment's base
# offset, so a segment can never exceed 2^31 - 1 bytes (Kafka: `segment.bytes` is an int) nor span
# more than 2^31 - 1 offsets; the log rolls before either would overflow.
segment_bytes_max = 2**31 - 1
segment_relative_offset_max = 2**31 - 1

# Smallest `segment.bytes` accepted (Kafka's lower bound is 14 bytes, which only makes sense in
# its tests; one KiB still lets tests roll segments quickly).
segment_bytes_min = 1 * KIB

# Kafka's defaults.
segment_bytes_default = 1 * GIB
index_interval_bytes_default = 4 * KIB

# An index file larger than this is treated as corrupt and rebuilt (a segment of 2 GiB indexed
# every 4 KiB needs 4 MiB of 8-byte entries; 10 MiB is Kafka's `segment.index.bytes` default).
index_bytes_max = 10 * MIB

# --- reads ----------------------------------------------------------------------------------

# The most bytes one read of one partition returns (Kafka's `max.partition.fetch.bytes` ceiling
# in practice). One batch larger than the requested `max_bytes` is still returned whole so that a
# consumer always makes progress (KIP-74).
fetch_partition_bytes_max = 64 * MIB

# --- the transport ----------------------------------------------------------------------------

# gRPC's default receive limit is 4 MiB; Samsa raises it so a request can carry a maximal batch
# plus its envelope. Servers and clients set both send and receive limits to this.
grpc_message_bytes_max = 80 * MIB

# Requests one client connection may have in progress at once on any service (HTTP/2's
# SETTINGS_MAX_CONCURRENT_STREAMS; gRPC's own default is unlimited). Anyone may open them
# (FetchMetadata and Fetch need no cluster secret), and a parked long-poll costs ~22 KiB (an
# asyncio task and gRPC's buffers, measured on a controller): one stranger's connection held
# tens of thousands and the memory grew without bound (20,000: +105 MiB; bounded, +22 MiB). The
# server refuses a stream beyond it (REFUSED_STREAM) and a gRPC client queues its calls beyond it
# instead, so a stream that never ends holds its slot for good: the bound must exceed what any
# process keeps open to one service, since its channels there share one connection (grpc's
# global subchannel pool, for channels with the same options). An SDK producer or consumer keeps
# one ProduceStream or FetchStream per broker and a few unary calls; a coordinator its produce
# and marker streams and at most one load fetch per partition it owns (100 by default); a broker
# one replica fetch stream per leader and one metadata long-poll. 1,000 leaves one process room
# for hundreds of clients; RFC 9113 asks for no less than 100, nginx allows 128.
grpc_streams_per_connection_max = 1_000

# Client connections one service process keeps at once (the service setting max.connections,
# Kafka's broker key of that name, whose default is unlimited). Each costs a file descriptor and
# ~17 KiB while idle (1,000 idle connections to a grpc.aio server: +16.5 MiB); unbounded, a
# stranger opening connections in a loop ran the process out of file descriptors, and then a
# broker could no longer open a segment file. gRPC closes a connection beyond it as it is
# accepted (the client sees UNAVAILABLE and retries with its backoff). The bound in force is
# also at most half the process's open-files limit (runtime/open_files.py), which a service
# raises to its hard limit as it starts.
grpc_connections_max = 10_000

# A connection with no request in progress for this long is closed (HTTP/2 GOAWAY; a gRPC client
# reconnects at its next call without failing it): Kafka's connections.max.idle.ms, 10 minutes.
# Every Samsa client keeps a stream open to the services it uses, so only a forgotten or idle
# client's connection goes, and its slot under grpc_connections_max with it.
grpc_connection_idle_ms = 600_000

# Requests (unary calls and streams) one service process has in progress at once, over all its
# connections. The per-connection bound times the connection bound is no memory bound (1,000 x
# 10,000 parked long-polls at ~22 KiB each would be 220 GB): this is, ~440 MiB at most. A request
# beyond it is refused at once with UNAVAILABLE, which every client retries after its backoff
# (RESOURCE_EXHAUSTED would tell Samsa's clients the request itself is too large). An SDK
# client keeps a few streams open to a service, so this serves thousands of them.
grpc_requests_in_progress_max = 20_000


# --- the controller and the metadata log -------------------------------------------------------

# The cluster secret authenticates the Raft port (pysyncobj derives a Fernet key from it with
# PBKDF2); 32 characters of token_urlsafe carry ~190 bits, far beyond guessing.
cluster_secret_length_min = 32

# A member's proof (an HMAC of the call and a timestamp, see services/runtime/membership.py) is
# accepted this far from the receiver's clock, either way. Wide enough for hosts whose clocks
# drift between NTP syncs; narrow enough that a proof captured off the wire is soon worthless.
member_auth_clock_skew_ms_max = 60_000

# The longest samsa-member-auth header accepted; a well-formed one is ~120 characters. Checked
# before anything is parsed, so a hostile header costs nothing.
member_auth_header_length_max = 256

# The longest a FetchMetadata long-poll waits for new records: long enough that idle followers
# cost nothing, short enough that a follower notices a dead controller and moves on.
metadata_long_poll_ms_max = 30_000

# Committed metadata batches a controller keeps in memory for followers fetching by offset; one
# further behind gets a snapshot instead (KRaft's snapshot-on-fetch).
metadata_history_batches_max = 10_000

# The most metadata a FetchMetadata answer carries as batches before it is cut (the follower
# fetches again at once); a snapshot is fetched in chunks instead (metadata_snapshot_chunk_bytes).
metadata_fetch_bytes_max = 8 * MIB

# A metadata snapshot crosses to a follower in chunks of at most this many bytes (FetchSnapshot,
# KIP-630; metadata/snapshot_transfer.py), so no answer nears the gRPC message bound whatever
# the image's size: whole, a snapshot passed it at ~2 million partitions (~41 bytes each at
# replication factor 3). 4 MiB: gRPC's own default message size, ~100k partitions a chunk.
metadata_snapshot_chunk_bytes = 4 * MIB

# The largest metadata snapshot a follower assembles (it holds the bytes, then the parsed
# records, before it loads them): ~25 million partitions, far beyond what a controller's
# replay keeps up with. A snapshot announced larger is refused before any chunk is fetched.
metadata_snapshot_bytes_max = 1024 * MIB

# The serialized bytes of committed batches a controller keeps for followers (with
# metadata_history_batches_max, whichever binds first). Parsed, they take ~5x that in memory
# (measured: 70 MiB of batches each creating a 1,000-partition topic held 379 MiB), so this is
# ~170 MiB per controller at most. A follower further behind than four full FetchMetadata answers
# gets one snapshot instead, no larger than these batches for any image up to ~800k partitions.
metadata_history_bytes_max = 4 * metadata_fetch_bytes_max

# How far beyond the active controller's committed metadata offset a read's min_metadata_offset
# may be before it is refused at once rather than after the read-your-writes wait. A leader cut
# off from its quorum believes it is active for up to pysyncobj's 5 s fallback while a new one
# commits; at the ~40k records/s the quorum applies, that is 200k records, so an offset 1M ahead
# exists nowhere (closer ones are judged after the wait, when the fallback has passed).
metadata_offset_ahead_max = 1_000_000

# The largest metadata batch (one Raft entry) the controller submits. A topic at
# topic_partitions_max with 3 replicas is ~370 KB of records, so this holds ~10 of them; it must
# fit one FetchMetadata answer, and it sizes the largest Raft frame a peer may send us (below).
metadata_batch_bytes_max = 4 * MIB

# Producer ids the controller gives a broker per AllocateProducerIds (Kafka's
# PRODUCER_ID_BLOCK_SIZE, KIP-730): each block costs one metadata record and one Raft commit, so
# a broker answers a thousand InitProducerId calls per controller round trip, and a broker that
# restarts wastes at most two blocks (the one in use and the one fetched ahead) of the 2^63 ids.
producer_id_block_size = 1000

# The batches a partition leader remembers per idempotent producer (Kafka's
# NUM_BATCHES_TO_RETAIN): a retry of any of them answers its original offsets. An idempotent
# producer keeps at most this many batches of a partition in flight, so every batch it may retry
# is among them; it costs ~36 bytes per batch per producer per partition, in memory and snapshots.
producer_state_batches_max = 5

# --- the Raft port (pysyncobj's transport, guarded by services/controller/raft_guard.py) --------

# The entries one append_entries message gathers (it may overshoot by one entry), and one chunk
# of a snapshot streamed to a lagging follower (pysyncobj's default). The batch is larger than
# any one entry on purpose: pysyncobj (0.3.x) sends a lone entry of batch size or more in chunks
# and marks the last chunk by the entry's unpickled length, too early, so followers failed to
# unpickle it ("pickle data was truncated") until it happened to travel with another entry.
raft_append_entries_batch_bytes = metadata_batch_bytes_max + 1
raft_snapshot_chunk_bytes = 64 * KIB

# The largest frame an authenticated peer may declare. The worst legitimate frame is an
# append_entries of just under one batch of entries plus one maximal metadata batch (a snapshot
# chunk or a forwarded command is smaller), pickled twice by pysyncobj (protocol 2 spells each
# byte >= 0x80 in two), zlib'd and Fernet-encrypted (base64: 4/3): 1.87x the entries for random
# bytes, measured (tests/unit/controller/test_raft_guard.py), so ~15 MiB for 8 MiB of entries.
# Checked on the 4-byte length, before a byte of the frame is buffered, let alone decrypted; a
# larger one closes the connection.
raft_frame_bytes_max = 24 * MIB

# The largest frame a connection may declare before it has proved the cluster secret: the
# handshake is three frames (a random key each way, then the peer's address) of ~200 bytes. A
# stranger's first frame header decides whether we read 4 KiB from it or close at once.
raft_handshake_frame_bytes_max = 4 * KIB

# Bytes pysyncobj may hold unparsed for one authenticated connection; past it the guard stops
# reading the socket until pysyncobj has parsed what it holds (TCP back-pressure, not a close).
# A maximal frame must fit, with room for the next frame's start.
raft_connection_buffer_bytes_max = 32 * MIB

# Incoming connections still in the handshake. A quorum has at most 5 controllers, each dialling
# us at most once at a time (pysyncobj: only the larger address dials); 16 leaves room for
# reconnect races. A new one beyond this closes the oldest (a stranger cannot hold the slots).
raft_unauthenticated_connections_max = 16

# Connections the kernel may queue on the Raft port before pysyncobj accepts them (it listens
# with 5, and accepts one per poll): a stranger's burst of connects then filled the queue and
# peers' SYNs were dropped, each costing them a 1 s retransmit (200 connects took 30 s, not 1 s).
raft_listen_backlog_max = 128

# The longest a connection may take to finish the handshake. A peer needs one round trip and two
# ticks (~100 ms); 3 s forgives a tick thread busy writing a snapshot, and an idle stranger's
# socket is closed instead of held for ever (pysyncobj only times out sockets that wake it).
raft_handshake_ms_max = 3_000

# WARN lines per window about Raft connections closed for breaking a bound: enough to name the
# offenders, while a flood of thousands of connections costs a few lines and a summary count.
raft_guard_log_lines_max = 5
raft_guard_log_window_ms = 60_000

# --- client quotas (KIP-13) ------------------------------------------------------------------

# The longest client.id a client may send (the samsa-client-id gRPC metadata) or a quota may
# name. Kafka bounds it only by its request header's 16-bit string length; 255 characters is far
# beyond real ids ("producer-12", "consumer-orders-3") and keeps quota records and the brokers'
# per-client byte counts small. The SDK refuses a longer client.id; a broker counts a longer one
# it receives under the default entity, like a client that sends none.
client_id_length_max = 255

# The most (client.id, kind) byte counts a broker keeps at once (services/broker/quotas.py), each
# a few hundred bytes: client ids are whatever clients send, so without a bound random ids would
# grow a broker's memory for ever. A count idle for a whole quota window is forgotten first;
# past the bound the least recently used one is, and that client starts a fresh window.
quota_tracked_clients_max = 100_000

# ACLs (Kafka bounds none): a resource name or host as long as a topic name; a principal "User:"+DN.
acl_name_length_max = 255
acl_principal_length_max = 512
acl_bindings_max = 10_000  # DescribeAcls answers every binding in one message

# --- SASL/SCRAM ----------------------------------------------------------------------------------

# SCRAM credentials (KIP-554; Kafka bounds none): all are in every image and in one Describe answer.
scram_credentials_max = 10_000  # far beyond a cluster's users (services, people); scram_control.py
# Kafka's bounds on PBKDF2 iterations (its ScramMechanism's): fewer is too cheap to guess against,
# more makes every login (one PBKDF2 on the client) slow for nothing.
scram_iterations_min = 4096
scram_iterations_max = 16384
# A salt of more than this is not a salt (Kafka's clients, and ours, make 32 bytes).
scram_salt_bytes_max = 64
# The longest user name, as an ACL resource name (a principal is "User:" + it).
scram_user_name_length_max = 255
# The longest SCRAM message either side reads (RFC 5802's are a few hundred bytes).
scram_message_bytes_max = 4 * KIB
# The longest mechanism name a SaslAuthenticate reads (the known ones have 13 characters).
sasl_mechanism_length_max = 32
# One exchange (two messages each way) ends within this: a client that opens the stream and
# waits holds a task of the process, not for long.
sasl_exchange_ms_max = 10_000
# The longest session ticket read: a maximal one is 1,072 bytes (a 20-byte header, a 255-character
# name's 1,020 bytes of UTF-8, a 32-byte HMAC), 1,430 characters of base64; longer metadata is
# refused before it is decoded, so a hostile header costs nothing.
sasl_ticket_chars_max = 1_430
# sasl.session.lifetime.ms: at least a minute (clients log in again before it runs out, so
# shorter only multiplies exchanges, each a PBKDF2 on the client), at most 7 days (a ticket that
# leaks works until then, unless its user's credential changes).
sasl_session_lifetime_ms_min = 60_000
sasl_session_lifetime_ms_max = 7 * 24 * 3600 * 1000
# SASL/OAUTHBEARER (KIP-255, KIP-768). A JWT an identity provider issues is a few hundred bytes to
# a few KiB (Keycloak's with many roles ~3 KiB); a longer one is refused before it is decoded.
oauthbearer_token_chars_max = 16 * KIB
# A JWKS document (an identity provider's signing keys: a handful, ~1 KiB each, old and new during
# a rotation) is read up to this many bytes, and at most this many keys of it are kept.
oauthbearer_jwks_bytes_max = 256 * KIB
oauthbearer_jwks_keys_max = 64
# A token naming a key the JWKS does not hold makes the process fetch the JWKS again, at most once
# per this many ms: a client sending made-up key ids cannot make it hammer the identity provider.
oauthbearer_jwks_refetch_ms_min = 10_000
# The token endpoint's answer a client reads (JSON with the token and its lifetime).
oauthbearer_token_response_bytes_max = 64 * KIB

# Names, counts and configs one admin request may carry: far beyond any real use, small enough
# that a careless or hostile caller cannot make the controller generate a huge batch.
admin_request_items_max = 1_000
topic_partitions_max = 10_000
topic_configs_per_request_max = 100
config_value_length_max = 4 * KIB

# Partitions one DescribeTopics answer carries (KIP-966's paging: a cursor and a partition limit;
# the client asks again from the answer's next_cursor). The default is KIP-966's
# (`max.request.partition.size.limit`): ~60 KB of answer, one quick read of the image. The maximum
# is topic_partitions_max, so that a caller may read any one topic in one answer. An answered
# partition is ~30 bytes plus up to 10 per replica (its id in `replicas` and in `isr`, 5 bytes
# each at most as varints): bounding it at 2 KiB covers replication factors of ~200, far beyond
# any real cluster's 3 to 5, and keeps a maximal answer at 20 MiB, well inside one gRPC message.
describe_topics_partitions_default = 2_000
describe_topics_partitions_max = topic_partitions_max
describe_topics_partition_bytes_max = 2 * KIB

# ISR proposals one AlterPartition may carry (the broker sends larger sets in chunks of this; the
# controller refuses a larger request with INVALID_ARGUMENT). Each accepted one becomes one
# PartitionChangeRecord in the request's single metadata batch: ~35 bytes plus 5 per ISR member
# (topic id, partition, the ids and their framing). Bounding a record at 1 KiB allows ISRs of ~190
# replicas, and 2,000 such records (2 MiB) still fit one metadata batch. 3,300 ISR changes after
# a restart then take two requests and two Raft commits rather than 3,300.
alter_partition_items_max = 2_000
alter_partition_record_bytes_max = 1 * KIB

# --- broker requests -----------------------------------------------------------------------------

# Partitions one Produce, Fetch, ListOffsets, OffsetCommit, OffsetFetch or OffsetDelete request may
# name: a client with thousands of partitions splits its requests; a careless one cannot make one
# request pin the event loop.
request_partitions_max = 10_000

# Partitions one DescribeLogDirs answer carries (its paging: a cursor, as DescribeTopics'). A
# broker may host more partitions than any request names, and "every partition" must still fit
# one gRPC message: an answered partition is ~35 bytes, plus its topic's name (up to 249
# characters, 4 bytes each in UTF-8) where each partition is of another topic, so a page of
# 10,000 stays near 10 MiB at worst, a few hundred KiB for real topic names.
log_dirs_answer_partitions_max = request_partitions_max
log_dirs_answer_partition_bytes_max = 4 * topic_name_length_max + 64

# The longest a Fetch long-poll waits (Kafka's fetch.max.wait.ms is 500 by default; 30 s is
# plenty for idle consumers and bounds how long a request holds server resources).
fetch_wait_ms_max = 30_000

# Fetch sessions (KIP-227) a broker keeps, and the partitions they hold between them (Kafka's
# max.incremental.fetch.session.cache.slots is 1,000). A session partition costs about half a
# KiB, so the cache stays near 100 MiB at worst; when it is full, fetchers get no new session and
# keep sending full fetches, which still work. A session unused this long may be evicted for a
# new one (Kafka's min.incremental.fetch.session.eviction.ms).
fetch_sessions_max = 1_000
fetch_session_partitions_total_max = 200_000
fetch_session_idle_ms = 120_000

# A Fetch's total answer (Kafka's fetch.max.bytes default is 50 MiB): it must fit one gRPC
# message with room for the envelope.
fetch_response_bytes_max = 64 * MIB

# The longest gRPC may take to write a consumer's fetch answer (services/broker/requests/
# answer_write_deadline.py). An unwritten answer holds its bytes of the broker's answer budget,
# and a client that never reads keeps the write from completing (HTTP/2 flow control): without a
# deadline a stranger could fill the budget and starve every consumer for as long as it liked.
# The SDK consumer's own request timeout is 30 s, so one that has not taken an answer for twice
# that is gone or stuck; 60 s also leaves a slow link ~1 MiB/s for a maximal 64 MiB answer.
fetch_answer_write_ms_max = 60_000

# Requests one ProduceStream may have in progress at once (the SDK keeps a handful per broker);
# beyond it the broker stops reading the stream until one completes (back-pressure).
produce_stream_in_flight_max = 64

# Answers one ProduceStream holds before they are written: as many as it may have in progress, so
# a client that stops reading stops the stream's reads instead of growing the broker's memory.
produce_stream_answers_queued_max = produce_stream_in_flight_max

# Log lines per window for each kind of refused or failed RPC (undecodable request, unexpected
# handler exception): enough to diagnose, yet a flood (7,809 fuzzed requests once wrote 6.4 MB of
# tracebacks) costs at most this many lines plus one summary count per window.
rpc_failure_log_lines_max = 10
rpc_failure_log_window_ms = 60_000

# The longest an acks=all produce waits for replication before REQUEST_TIMED_OUT.
produce_timeout_ms_max = 300_000

# Typed records (the generated-code path) one produce request may carry per partition; they are
# encoded by the broker, so this bounds the broker's per-request work.
typed_records_per_partition_max = 100_000

# The longest rule of ssl.principal.mapping.rules: its regex runs on every client certificate's
# subject DN; real rules are under 200 characters, and a bound keeps a typo'd paste from compiling.
acl_principal_rule_chars_max = 1 * KIB

# --- relations --------------------------------------------------------------------------------

assert max_message_bytes_default <= batch_bytes_max
assert batch_bytes_max <= batch_uncompressed_bytes_max
assert batch_bytes_max + 1 * MIB <= grpc_message_bytes_max, "a maximal batch must fit a message"
assert fetch_partition_bytes_max <= grpc_message_bytes_max
assert fetch_response_bytes_max + 1 * MIB <= grpc_message_bytes_max
assert batch_bytes_max < segment_bytes_max, "one batch must fit in one segment"
assert segment_bytes_min < max_message_bytes_default
assert metadata_batch_bytes_max <= metadata_fetch_bytes_max, "a batch fits one metadata fetch"
assert 2 * replication_factor_max * 5 * 3 + 40 <= describe_topics_partition_bytes_max
assert 2 * replication_factor_max * 5 + 35 <= alter_partition_record_bytes_max
assert metadata_batch_bytes_max + 1 * MIB <= grpc_message_bytes_max
assert metadata_snapshot_chunk_bytes + 1 * MIB <= grpc_message_bytes_max
# One maximal AlterPartition commits as one metadata batch.
assert alter_partition_items_max * alter_partition_record_bytes_max <= metadata_batch_bytes_max
assert (
    offset_commit_batch_overhead_bytes
    + 2 * 4 * group_id_length_max  # UTF-8 takes at most 4 bytes a character
    + 4 * topic_name_length_max
    + 4 * KIB  # an offset's metadata (group_offsets.OFFSET_METADATA_BYTES_MAX)
    + offset_commit_record_overhead_bytes_max
    <= offset_commit_batch_bytes_max
), "a commit of one partition always fits the batch: a client can always split a commit"
assert 0 < producer_id_block_size <= 2**31 - 1, "a block's length travels as an int32"
assert (
    2 * topic_partitions_max * coordinator_assignment_record_bytes_max <= metadata_batch_bytes_max
), "every partition of both coordinator topics must be reassignable in one metadata batch"
assert 0 < describe_topics_partitions_default <= describe_topics_partitions_max
assert (
    describe_topics_partitions_max * describe_topics_partition_bytes_max + 1 * MIB
    <= grpc_message_bytes_max
), "a maximal DescribeTopics answer must fit one gRPC message"
assert (
    log_dirs_answer_partitions_max * log_dirs_answer_partition_bytes_max + 1 * MIB
    <= grpc_message_bytes_max
), "a maximal DescribeLogDirs page must fit one gRPC message"
# The largest legitimate Raft frame (see raft_frame_bytes_max): entries and envelope, at most 2x
# once pickled, zlib'd and base64'd (1.87x measured), plus Fernet's framing.
assert (metadata_batch_bytes_max + raft_append_entries_batch_bytes + 1 * KIB) * 2 + 1 * KIB <= (
    raft_frame_bytes_max
), "a maximal metadata batch must fit one Raft frame"
assert raft_snapshot_chunk_bytes * 2 + 1 * KIB <= raft_frame_bytes_max
assert metadata_batch_bytes_max < raft_append_entries_batch_bytes, "never chunk a lone entry"
assert raft_handshake_frame_bytes_max < raft_frame_bytes_max
assert raft_frame_bytes_max + 4 <= raft_connection_buffer_bytes_max, "a maximal frame must fit"
assert grpc_requests_in_progress_max >= grpc_streams_per_connection_max, "one full connection fits"
# A maximal AlterClientQuotas (two keys per entity, UTF-8 client ids) commits as one batch.
assert admin_request_items_max * 2 * (4 * client_id_length_max + 64) <= metadata_batch_bytes_max
_acl_binding_bytes = 4 * (2 * acl_name_length_max + acl_principal_length_max) + 64  # UTF-8
assert admin_request_items_max * _acl_binding_bytes <= metadata_batch_bytes_max, "one batch"
assert acl_bindings_max * _acl_binding_bytes + 1 * MIB <= grpc_message_bytes_max
