'use strict';
// A small Samsa client for Node.js, built from proto/samsa/v1 alone (no batch codec): it
// produces typed records, fetches decoded ones, and joins consumer groups with the
// server-side assignment protocol (ConsumerGroupHeartbeat). It bootstraps from brokers (or
// controllers): they answer metadata reads and forward admin writes.

const crypto = require('node:crypto');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_ROOT = path.resolve(__dirname, '..', '..', 'proto');
const PROTO_FILES = ['broker.proto', 'controller.proto', 'coordinator.proto'].map((name) =>
  path.join(PROTO_ROOT, 'samsa', 'v1', name),
);

// int64 fields arrive as decimal strings (exact); this client turns offsets into Numbers, which
// are exact up to 2^53 - 1, far beyond any real log. Enums arrive as their names, so an error
// reads as "ERROR_CODE_NOT_LEADER_OR_FOLLOWER", not 6.
const LOADER_OPTIONS = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

const NO_ERROR = 'ERROR_CODE_UNSPECIFIED';
// The codes errors.proto marks "Retriable: yes" that leave nothing written, so a retry of a
// non-idempotent typed produce cannot store the records twice (REQUEST_TIMED_OUT and
// NOT_ENOUGH_REPLICAS_AFTER_APPEND are left out on purpose: see RETRIABLE_IF_IDEMPOTENT).
const RETRIABLE = new Set([
  'ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION',
  'ERROR_CODE_LEADER_NOT_AVAILABLE',
  'ERROR_CODE_NOT_LEADER_OR_FOLLOWER',
  'ERROR_CODE_NOT_ENOUGH_REPLICAS',
  'ERROR_CODE_FENCED_LEADER_EPOCH',
  'ERROR_CODE_UNKNOWN_LEADER_EPOCH',
  'ERROR_CODE_KAFKA_STORAGE_ERROR',
  'ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS',
  'ERROR_CODE_COORDINATOR_NOT_AVAILABLE',
  'ERROR_CODE_NOT_COORDINATOR',
  'ERROR_CODE_NOT_CONTROLLER',
]);
// What an idempotent produce retries: RETRIABLE and the retriable codes whose records may have
// been written (and may still be committed), since the leader dedupes a retry by its producer
// id and sequence.
const RETRIABLE_IF_IDEMPOTENT = new Set([
  ...RETRIABLE,
  'ERROR_CODE_REQUEST_TIMED_OUT',
  'ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND',
]);
const SEQUENCE_MODULUS = 2 ** 31; // base_sequence is an int32 that wraps to 0 after 2^31 - 1
const COORDINATOR_MOVED = new Set([
  'ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS',
  'ERROR_CODE_COORDINATOR_NOT_AVAILABLE',
  'ERROR_CODE_NOT_COORDINATOR',
]);
const REJOIN = new Set(['ERROR_CODE_UNKNOWN_MEMBER_ID', 'ERROR_CODE_FENCED_MEMBER_EPOCH']);
const MAX_MESSAGE_BYTES = 80 * 1024 * 1024 + 1024 * 1024;

let services = null;

// The service constructors, loaded from the .proto files once per process.
function loadServices() {
  if (services === null) {
    const v1 = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS)).samsa
      .v1;
    services = {
      broker: v1.BrokerService,
      controller: v1.ControllerService,
      lookup: v1.CoordinatorLookupService,
      group: v1.GroupCoordinatorService,
    };
  }
  return services;
}

// An ErrorCode a server answered (per partition, topic or group), or a client-side give-up.
class SamsaError extends Error {
  constructor(code, message) {
    super(message ? `${code}: ${message}` : code);
    this.name = 'SamsaError';
    this.code = code;
    this.retriable = RETRIABLE.has(code);
  }
}

// Throws a SamsaError when `result` (any message with error_code and error_message) has one.
function check(result, what) {
  if (result.error_code && result.error_code !== NO_ERROR) {
    const detail = [what, result.error_message].filter(Boolean).join(': ');
    throw new SamsaError(result.error_code, detail);
  }
  return result;
}

// An int64 field (a decimal string) as a Number, refusing one that a Number cannot hold exactly.
function toInt(value) {
  const number = Number(value);
  if (!Number.isSafeInteger(number)) throw new RangeError(`int64 ${value} exceeds 2^53 - 1`);
  return number;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Runs `attempt` until it returns, retrying retriable SamsaErrors and unreachable servers
// (gRPC UNAVAILABLE) with a growing backoff until `timeoutMs` passed; then throws the last error.
async function withRetries(timeoutMs, attempt) {
  const deadline = Date.now() + timeoutMs;
  for (let backoff = 100; ; backoff = Math.min(backoff * 2, 1000)) {
    try {
      return await attempt();
    } catch (error) {
      const unreachable = error.code === grpc.status.UNAVAILABLE;
      if (!(error.retriable || unreachable) || Date.now() + backoff > deadline) throw error;
      await sleep(backoff);
    }
  }
}

function splitEndpoints(bootstrap) {
  const list = Array.isArray(bootstrap) ? bootstrap : String(bootstrap).split(',');
  const endpoints = list.map((item) => item.trim()).filter(Boolean);
  if (endpoints.length === 0) throw new Error('no bootstrap address given');
  return endpoints;
}

// A record as the application gives it: strings become UTF-8 Buffers; null stays null (a null
// key or value differs from an empty one).
function toBytes(data) {
  if (data === null || data === undefined) return null;
  return Buffer.isBuffer(data) ? data : Buffer.from(String(data), 'utf8');
}

// Kafka's default partitioner for keyed records, bit-exact with the Python SDK's
// (samsa_client/partitioner.py) and with Java's `Utils.murmur2`: 32-bit MurmurHash2, seed
// 0x9747b28c, made positive by masking the sign bit, modulo the partition count. So a key lands
// on the same partition whichever language's client sent it, and one key's records stay in order.
function murmur2(bytes) {
  const m = 0x5bd1e995;
  const length = bytes.length;
  const whole = length & ~3;
  let h = 0x9747b28c ^ length;
  for (let i = 0; i < whole; i += 4) {
    let k = bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  switch (length & 3) {
    case 3:
      h ^= bytes[whole + 2] << 16;
    // falls through
    case 2:
      h ^= bytes[whole + 1] << 8;
    // falls through
    case 1:
      h ^= bytes[whole];
      h = Math.imul(h, m);
    // no default: a length that is a multiple of 4 has no tail
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

// The partition of a key (a string, as UTF-8, or a Buffer) among `count` partitions.
function partitionForKey(key, count) {
  return (murmur2(toBytes(key)) & 0x7fffffff) % count;
}

// The PartitionData of `records` on the portable path. With `producer` ({producerId,
// producerEpoch, baseSequence}) the leader builds an idempotent batch of them.
function typedPartitionData(partition, records, producer = null) {
  const data = { partition, typed_records: records.map(toTypedRecord) };
  if (producer) {
    data.producer_id = producer.producerId;
    data.producer_epoch = producer.producerEpoch;
    data.base_sequence = producer.baseSequence;
  }
  return data;
}

function toTypedRecord(record) {
  const headers = (record.headers || []).map(([key, value]) => ({ key, value: toBytes(value) }));
  // records.proto says 0 means "now", but the broker stores 0 as given: stamp the time here,
  // as Kafka's producers do. proto3 `optional bytes`: leaving the field out is null, an empty
  // Buffer is empty.
  const typed = { headers, timestamp_ms: record.timestamp || Date.now() };
  if (record.key !== null && record.key !== undefined) typed.key = toBytes(record.key);
  if (record.value !== null && record.value !== undefined) typed.value = toBytes(record.value);
  return typed;
}

// A decoded record as this client hands it out; an unset optional field (undefined) is null.
function fromTypedRecord(record) {
  return {
    offset: toInt(record.offset),
    timestamp: toInt(record.timestamp_ms),
    key: record.key === undefined ? null : record.key,
    value: record.value === undefined ? null : record.value,
    headers: record.headers.map((h) => [h.key, h.value === undefined ? null : h.value]),
  };
}

// The one partition result of a per-topic, per-partition answer (Produce, Fetch).
function partitionResult(answer, topic, partition) {
  for (const t of answer.topics) {
    const found = t.name === topic && t.partitions.find((p) => p.partition === partition);
    if (found) return found;
  }
  throw new Error(`the answer has no result for ${topic}[${partition}]`);
}

class SamsaClient {
  // bootstrap: "host:port,host:port" or an array of them (brokers, or controllers).
  // idempotence (default true): produce with acks -1 is idempotent; see produce().
  constructor(bootstrap, { timeoutMs = 15000, clientId = 'samsa-node', idempotence = true } = {}) {
    this.bootstrap = splitEndpoints(bootstrap);
    this.timeoutMs = timeoutMs;
    this.clientId = clientId;
    this.idempotence = idempotence;
    this.stubs = new Map();
    this.metadataOffset = 0; // of our last admin write, so that reads see it
    // The idempotent producer's identity, a Promise of {producerId, producerEpoch, sequences}
    // (sequences: "topic:partition" -> the next base_sequence), made on the first idempotent
    // produce; null until then and after a failure dropped it.
    this.producer = null;
    this.partitionQueues = new Map(); // "topic:partition" -> the tail of its idempotent produces
  }

  stub(kind, endpoint) {
    const key = `${kind}@${endpoint}`;
    if (!this.stubs.has(key)) {
      const Service = loadServices()[kind];
      const options = { 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES };
      this.stubs.set(key, new Service(endpoint, grpc.credentials.createInsecure(), options));
    }
    return this.stubs.get(key);
  }

  // One unary call with a deadline; resolves with the answer message.
  call(kind, endpoint, method, request, timeoutMs = this.timeoutMs) {
    const stub = this.stub(kind, endpoint);
    return new Promise((resolve, reject) => {
      stub[method](request, { deadline: Date.now() + timeoutMs }, (error, answer) => {
        if (error) {
          error.message = `${method} at ${endpoint}: ${error.details || error.message}`;
          reject(error);
        } else resolve(answer);
      });
    });
  }

  // Asks the bootstrap servers in turn until one answers at the gRPC level.
  async callAny(kind, method, request) {
    let lastError;
    for (const endpoint of this.bootstrap) {
      try {
        return await this.call(kind, endpoint, method, request);
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }

  // An admin write: a broker forwards it to the active controller; a controller that is not
  // the active one answers NOT_CONTROLLER, naming the active one when it knows it.
  async controllerWrite(method, request) {
    let endpoint = null;
    return withRetries(this.timeoutMs, async () => {
      const answer = endpoint
        ? await this.call('controller', endpoint, method, request)
        : await this.callAny('controller', method, request);
      const status = answer.status || {};
      if (status.error_code === 'ERROR_CODE_NOT_CONTROLLER') {
        endpoint = status.active_controller ? status.active_controller.endpoint : null;
      }
      check(status, method);
      this.metadataOffset = Math.max(this.metadataOffset, toInt(status.metadata_offset));
      return answer;
    });
  }

  async describeCluster() {
    const answer = await withRetries(this.timeoutMs, () =>
      this.callAny('controller', 'DescribeCluster', { min_metadata_offset: this.metadataOffset }),
    );
    return {
      clusterId: answer.cluster_id,
      controllers: answer.controllers.map((c) => ({
        id: c.node_id,
        endpoint: c.endpoint,
        active: c.is_active,
      })),
      brokers: answer.brokers.map((b) => ({
        id: b.broker_id,
        endpoint: b.endpoint,
        fenced: b.is_fenced,
      })),
      coordinators: answer.coordinators.map((c) => ({
        id: c.coordinator_id,
        endpoint: c.endpoint,
        fenced: c.is_fenced,
      })),
    };
  }

  // Creates a topic; true when created, false when it already existed.
  async createTopic(name, partitions, replicationFactor) {
    const request = {
      topics: [{ name, num_partitions: partitions, replication_factor: replicationFactor }],
    };
    const answer = await this.controllerWrite('CreateTopics', request);
    const result = answer.topics[0];
    if (result.error_code === 'ERROR_CODE_TOPIC_ALREADY_EXISTS') return false;
    check(result, `topic ${name}`);
    return true;
  }

  // The topic's partitions with their leaders: [{partition, leader, leaderEpoch, endpoint}].
  // Retried while the topic is unknown or a partition has no leader (just created).
  async describeTopic(name) {
    return withRetries(this.timeoutMs, async () => {
      const answer = await this.callAny('controller', 'DescribeTopics', {
        names: [name],
        min_metadata_offset: this.metadataOffset,
      });
      const topic = check(answer.topics[0], `topic ${name}`);
      const endpoints = answer.broker_endpoints;
      return topic.partitions.map((p) => {
        if (p.leader < 0 || !endpoints[p.leader]) {
          throw new SamsaError('ERROR_CODE_LEADER_NOT_AVAILABLE', `${name}[${p.partition}]`);
        }
        const leader = { leader: p.leader, leaderEpoch: p.leader_epoch };
        return { partition: p.partition, ...leader, endpoint: endpoints[p.leader] };
      });
    });
  }

  async leaderOf(topic, partition) {
    const found = (await this.describeTopic(topic)).find((p) => p.partition === partition);
    if (!found) throw new SamsaError('ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION', `${topic}[${partition}]`);
    return found;
  }

  // Appends records ([{key, value, headers: [[k, v]], timestamp}], strings or Buffers) to one
  // partition through its leader; resolves with the offset of the first (-1 with acks 0).
  //
  // With acks -1 and idempotence on (the default, as in Kafka >= 3.0), each call is written at
  // most once even though it is retried: it carries this client's producer id, epoch and a
  // sequence per partition (KIP-98), and the leader answers a retry of a write it already holds
  // (a lost answer, REQUEST_TIMED_OUT, ...) with the first write's offsets instead of storing it
  // again. The calls to one partition reach it one at a time, in the order they were made, so
  // records are stored in call order. What it does not promise: a call that fails (rejects) may
  // or may not have been written; resending it is the caller's choice, and may store it twice.
  // With acks 0 or 1, or `idempotence: false`, a retry after a lost answer may store it twice.
  async produce(topic, partition, records, acks = -1) {
    if (acks === -1 && this.idempotence) return this.produceIdempotent(topic, partition, records);
    const data = typedPartitionData(partition, records);
    return withRetries(this.timeoutMs, () => this.sendProduce(topic, data, acks));
  }

  // One Produce of one PartitionData to its partition's leader (found again at every call);
  // resolves with the base offset, throws a SamsaError for the partition's error.
  async sendProduce(topic, data, acks, retriable = RETRIABLE) {
    const request = { acks, timeout_ms: this.timeoutMs, topics: [{ name: topic, partitions: [data] }] };
    const leader = await this.leaderOf(topic, data.partition);
    const answer = await this.call('broker', leader.endpoint, 'Produce', request, 2 * this.timeoutMs);
    const result = partitionResult(answer, topic, data.partition);
    try {
      check(result, `${topic}[${data.partition}]`);
    } catch (error) {
      if (retriable.has(error.code)) error.retriable = true;
      throw error;
    }
    return toInt(result.base_offset);
  }

  // produce() with acks -1 and a producer id. The base_sequence is fixed before the retry loop,
  // so every retry sends the identical request, which the leader dedupes.
  produceIdempotent(topic, partition, records) {
    const key = `${topic}:${partition}`;
    return this.inPartitionOrder(key, async () => {
      const identity = this.producerIdentity();
      const producer = await identity;
      const baseSequence = producer.sequences.get(key) || 0;
      const data = typedPartitionData(partition, records, { ...producer, baseSequence });
      try {
        const baseOffset = await withRetries(this.timeoutMs, () =>
          this.sendProduce(topic, data, -1, RETRIABLE_IF_IDEMPOTENT),
        );
        producer.sequences.set(key, (baseSequence + records.length) % SEQUENCE_MODULUS);
        return baseOffset;
      } catch (error) {
        this.dropProducer(identity);
        throw error;
      }
    });
  }

  // Runs `task` once every task queued before it for the same partition has settled, so that
  // idempotent produces reach the leader one at a time, in call order, each sequence after the
  // previous one's outcome is known.
  inPartitionOrder(key, task) {
    const run = (this.partitionQueues.get(key) || Promise.resolve()).then(task);
    const tail = run.catch(() => {});
    this.partitionQueues.set(key, tail);
    tail.then(() => {
      if (this.partitionQueues.get(key) === tail) this.partitionQueues.delete(key);
    });
    return run;
  }

  // This client's producer identity, asking InitProducerId once: concurrent first produces
  // share the one call. A failed call is not kept, so the next produce asks again.
  producerIdentity() {
    if (this.producer === null) {
      const asked = this.initProducerId().then(({ producerId, producerEpoch }) => ({
        producerId,
        producerEpoch,
        sequences: new Map(),
      }));
      this.producer = asked;
      asked.catch(() => {
        if (this.producer === asked) this.producer = null;
      });
    }
    return this.producer;
  }

  // Forgets the producer identity (the Promise producerIdentity() gave) after a produce made
  // with it failed, so that the next produce asks for a new producer id and starts every
  // partition at sequence 0. OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID and
  // INVALID_PRODUCER_EPOCH mean the leader cannot go on with these sequences; and after any
  // other failure (retries exhausted on a timeout, an unreachable leader) the records may or may
  // not have been written, so sending other records with the same sequence could be taken for a
  // retry and silently dropped. A new producer id is safe because it continues nothing: no
  // record of the failed call is assumed written, and the caller decides whether to resend.
  // Produces already under way with the old identity finish with it.
  dropProducer(identity) {
    if (this.producer === identity) this.producer = null;
  }

  // A new idempotent producer identity from any broker (InitProducerId with no transactional
  // id): {producerId (a decimal string, as int64s arrive), producerEpoch}.
  async initProducerId() {
    const answer = await withRetries(this.timeoutMs, async () =>
      check(await this.callAny('broker', 'InitProducerId', { transactional_id: '' }), 'InitProducerId'),
    );
    return { producerId: answer.producer_id, producerEpoch: answer.producer_epoch };
  }

  // For tests of the broker's deduplication: sends one typed PartitionData once (no retry,
  // no sequence bookkeeping), with `producer` ({producerId, producerEpoch, baseSequence}) or
  // without, and resolves with {errorCode, baseOffset} as the leader answered.
  async produceOnce(topic, partition, records, { acks = -1, producer = null } = {}) {
    const data = typedPartitionData(partition, records, producer);
    try {
      return { errorCode: NO_ERROR, baseOffset: await this.sendProduce(topic, data, acks) };
    } catch (error) {
      if (!(error instanceof SamsaError)) throw error;
      return { errorCode: error.code, baseOffset: null };
    }
  }

  // Appends records to the partitions their keys choose (partitionForKey, as every Samsa and
  // Kafka client does); records without a key all go to one partition picked at random for the
  // call (Kafka's sticky partitioner does the same per batch). Resolves with one
  // {partition, baseOffset, count} per partition written, in partition order.
  async produceByKey(topic, records, acks = -1) {
    const count = (await this.describeTopic(topic)).length;
    const keyless = Math.floor(Math.random() * count);
    const byPartition = new Map();
    for (const record of records) {
      const hasKey = record.key !== null && record.key !== undefined;
      const partition = hasKey ? partitionForKey(record.key, count) : keyless;
      if (!byPartition.has(partition)) byPartition.set(partition, []);
      byPartition.get(partition).push(record);
    }
    const written = [];
    for (const partition of [...byPartition.keys()].sort((a, b) => a - b)) {
      const group = byPartition.get(partition);
      const baseOffset = await this.produce(topic, partition, group, acks);
      written.push({ partition, baseOffset, count: group.length });
    }
    return written;
  }

  // Deletes one partition's records below `offset` (-1: every record up to the high watermark),
  // as Kafka's DeleteRecords (KIP-107). Resolves with the partition's low watermark once the
  // leader and its in-sync followers all start there, so no later leader serves what went.
  async deleteRecords(topic, partition, offset) {
    const request = {
      topics: [{ name: topic, partitions: [{ partition, offset }] }],
      timeout_ms: this.timeoutMs,
    };
    return withRetries(this.timeoutMs, async () => {
      const leader = await this.leaderOf(topic, partition);
      const answer = await this.call('broker', leader.endpoint, 'DeleteRecords', request, 2 * this.timeoutMs);
      const result = check(partitionResult(answer, topic, partition), `${topic}[${partition}]`);
      return toInt(result.low_watermark);
    });
  }

  // Reads one partition from `offset`, waiting up to maxWaitMs for data. Resolves with
  // {records, nextFetchOffset, highWatermark}; records are at or after `offset`.
  async fetch(topic, partition, offset, maxWaitMs = 500) {
    const request = {
      max_wait_ms: maxWaitMs,
      min_bytes: 1,
      max_bytes: 16 * 1024 * 1024,
      decode_records: true,
      topics: [
        {
          name: topic,
          partitions: [{ partition, fetch_offset: offset, partition_max_bytes: 1024 * 1024 }],
        },
      ],
    };
    return withRetries(this.timeoutMs, async () => {
      const leader = await this.leaderOf(topic, partition);
      const answer = await this.call('broker', leader.endpoint, 'Fetch', request, maxWaitMs + this.timeoutMs);
      check(answer, 'Fetch');
      const result = check(partitionResult(answer, topic, partition), `${topic}[${partition}]`);
      return {
        records: result.decoded_records.map(fromTypedRecord),
        nextFetchOffset: toInt(result.next_fetch_offset),
        highWatermark: toInt(result.high_watermark),
      };
    });
  }

  // host:port of the group's coordinator (any broker or controller answers FindCoordinator).
  async findCoordinator(groupId) {
    return withRetries(this.timeoutMs, async () => {
      const answer = await this.callAny('lookup', 'FindCoordinator', {
        key_type: 'COORDINATOR_KEY_TYPE_GROUP',
        keys: [groupId],
      });
      return check(answer.coordinators[0], `group ${groupId}`).endpoint;
    });
  }

  // One call to the group's coordinator, finding it again while it moves or loads.
  async groupCall(groupId, method, request, errorOf) {
    return withRetries(this.timeoutMs, async () => {
      const endpoint = await this.findCoordinator(groupId);
      const answer = await this.call('group', endpoint, method, request);
      const error = errorOf(answer);
      if (error && COORDINATOR_MOVED.has(error.error_code)) check(error, `group ${groupId}`);
      return answer;
    });
  }

  // The group's committed offsets of `partitions` ([{topic, partition}]), as a Map from
  // "topic:partition" to the offset (-1 when nothing was committed).
  async committedOffsets(groupId, partitions) {
    const byTopic = groupByTopic(partitions);
    const topics = [...byTopic].map(([topic, numbers]) => ({ topic, partitions: numbers }));
    const answer = await this.groupCall(groupId, 'OffsetFetch', { group_id: groupId, topics }, (a) => a);
    check(answer, `group ${groupId}`);
    const offsets = new Map();
    for (const t of answer.topics) {
      for (const p of t.partitions) {
        check(p, `${t.name}[${p.partition}]`);
        offsets.set(`${t.name}:${p.partition}`, toInt(p.committed_offset));
      }
    }
    return offsets;
  }

  // Starts a member of `groupId` subscribed to `topics`; see GroupMember.
  async joinGroup(groupId, topics, options = {}) {
    const member = new GroupMember(this, groupId, topics, options);
    await member.join();
    return member;
  }

  close() {
    for (const stub of this.stubs.values()) stub.close();
    this.stubs.clear();
  }
}

// [{topic, partition}] as a Map from topic to its ascending partition numbers.
function groupByTopic(partitions) {
  const byTopic = new Map();
  for (const { topic, partition } of partitions) {
    if (!byTopic.has(topic)) byTopic.set(topic, []);
    byTopic.get(topic).push(partition);
  }
  for (const numbers of byTopic.values()) numbers.sort((a, b) => a - b);
  return byTopic;
}

function toOwnedPartitions(partitions) {
  return { topics: [...groupByTopic(partitions)].map(([topic, numbers]) => ({ topic, partitions: numbers })) };
}

function fromOwnedPartitions(owned) {
  const partitions = [];
  for (const t of (owned && owned.topics) || []) {
    for (const partition of t.partitions) partitions.push({ topic: t.topic, partition });
  }
  return partitions;
}

function samePartitions(a, b) {
  const key = (list) => list.map((tp) => `${tp.topic}:${tp.partition}`).sort().join(',');
  return key(a) === key(b);
}

// A consumer-group member (KIP-848): it heartbeats in the background every
// heartbeat_interval_ms and owns exactly what the last answer assigned. The coordinator
// computes every assignment; the member only reports what it owns when that changes.
class GroupMember {
  constructor(client, groupId, topics, { rebalanceTimeoutMs = 30000 } = {}) {
    this.client = client;
    this.groupId = groupId;
    this.topics = topics;
    this.rebalanceTimeoutMs = rebalanceTimeoutMs;
    this.memberId = crypto.randomUUID(); // made once, kept across rejoins
    this.memberEpoch = 0;
    this.assignment = []; // [{topic, partition}] the member owns now
    this.ownedChanged = true; // owned_partitions must be sent (join: empty)
    this.intervalMs = 1000;
    this.timer = null;
    this.beating = null; // the heartbeat in flight
    this.error = null; // a heartbeat error that stopped the member
    this.listeners = [];
    this.stopped = false;
  }

  // Joins (member epoch 0) and starts heartbeating.
  async join() {
    this.memberEpoch = 0;
    await this.heartbeat();
    this.schedule();
  }

  request() {
    const request = { group_id: this.groupId, member_id: this.memberId, member_epoch: this.memberEpoch };
    if (this.memberEpoch === 0) {
      // Required on join; left unset afterwards, which means "unchanged".
      request.subscription = { topic_names: this.topics };
      request.rebalance_timeout_ms = this.rebalanceTimeoutMs;
      request.client_id = this.client.clientId;
    }
    // Unset means "unchanged"; an empty set is sent on join.
    if (this.ownedChanged) request.owned_partitions = toOwnedPartitions(this.assignment);
    return request;
  }

  async heartbeat() {
    const sentOwned = this.ownedChanged;
    const answer = await this.client.groupCall(
      this.groupId,
      'ConsumerGroupHeartbeat',
      this.request(),
      (a) => a,
    );
    if (REJOIN.has(answer.error_code)) {
      // Drop every partition without committing and join again with epoch 0.
      this.memberEpoch = 0;
      this.setAssignment([]);
      return;
    }
    check(answer, `group ${this.groupId}`);
    if (sentOwned) this.ownedChanged = false;
    this.memberEpoch = answer.member_epoch;
    this.intervalMs = answer.heartbeat_interval_ms || this.intervalMs;
    // The answer is always the full set (never a change); unset on error only.
    if (answer.assignment) this.setAssignment(fromOwnedPartitions(answer.assignment));
  }

  setAssignment(partitions) {
    if (samePartitions(partitions, this.assignment)) return;
    this.assignment = partitions;
    this.ownedChanged = true;
    for (const listener of this.listeners) listener(partitions);
  }

  schedule() {
    if (this.stopped) return;
    // Report a changed assignment at once, so the group reaches its target sooner.
    const delay = this.ownedChanged ? 0 : this.intervalMs;
    this.timer = setTimeout(() => {
      this.beating = this.heartbeat()
        .then(() => this.schedule())
        .catch((error) => {
          this.error = error;
        });
    }, delay);
  }

  // Resolves with the assignment once it is not empty; rejects after timeoutMs.
  async waitForAssignment(timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    while (this.assignment.length === 0 || this.ownedChanged) {
      if (this.error) throw this.error;
      if (Date.now() > deadline) throw new Error(`group ${this.groupId}: no partition assigned within ${timeoutMs} ms`);
      await sleep(50);
    }
    return this.assignment;
  }

  // Commits offsets (a Map from "topic:partition", or [{topic, partition, offset}]): the next
  // offset to read, i.e. the last processed + 1. Throws on the first partition that failed.
  async commit(offsets) {
    const entries = offsets instanceof Map
      ? [...offsets].map(([key, offset]) => {
          const at = key.lastIndexOf(':');
          return { topic: key.slice(0, at), partition: Number(key.slice(at + 1)), offset };
        })
      : offsets;
    const byTopic = new Map();
    for (const { topic, partition, offset } of entries) {
      if (!byTopic.has(topic)) byTopic.set(topic, []);
      byTopic.get(topic).push({ partition, committed_offset: offset, committed_leader_epoch: -1 });
    }
    const request = {
      group_id: this.groupId,
      member_id: this.memberId,
      member_epoch: this.memberEpoch,
      topics: [...byTopic].map(([name, partitions]) => ({ name, partitions })),
    };
    const firstError = (answer) => {
      for (const t of answer.topics) {
        const failed = t.partitions.find((p) => p.error_code !== NO_ERROR);
        if (failed) return { ...failed, error_message: `${t.name}[${failed.partition}] ${failed.error_message}` };
      }
      return null;
    };
    const answer = await this.client.groupCall(this.groupId, 'OffsetCommit', request, firstError);
    const failed = firstError(answer);
    if (failed) check(failed, `commit for group ${this.groupId}`);
  }

  // Leaves the group (member epoch -1): its partitions are reassigned at once.
  async leave() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = null;
    await this.beating;
    this.memberEpoch = -1;
    const answer = await this.client.groupCall(
      this.groupId,
      'ConsumerGroupHeartbeat',
      { group_id: this.groupId, member_id: this.memberId, member_epoch: -1 },
      (a) => a,
    );
    check(answer, `leaving group ${this.groupId}`);
    this.assignment = [];
  }
}

module.exports = { SamsaClient, GroupMember, SamsaError, NO_ERROR, murmur2, partitionForKey };
