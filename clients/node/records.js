'use strict';
// Records between the application and the proto's typed Record, and the partitioner.

const { toInt } = require('./errors');
const { checkTimestamp } = require('./checks');

// A record as the application gives it: bytes (a Buffer, any other Uint8Array or an
// ArrayBuffer) as they are, anything else as the UTF-8 of its string; null stays null (a null
// key or value differs from an empty one). With `copy`, bytes are copied rather than shared with
// the application's buffer.
function toBytes(data, copy = false) {
  if (data === null || data === undefined) return null;
  let shared;
  if (Buffer.isBuffer(data)) shared = data;
  else if (ArrayBuffer.isView(data)) shared = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  else if (data instanceof ArrayBuffer) shared = Buffer.from(data);
  else return Buffer.from(String(data), 'utf8');
  return copy ? Buffer.from(shared) : shared;
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

// `records` as the proto's typed Records, taken as they are now: the call that sends them may
// send them later (after the metadata read, behind earlier produces to the partition) and again
// (a retry), and must send what the application gave, as Kafka's send() does, whatever it does
// with its records, arrays and buffers once the call returned.
function typedRecords(records) {
  return Array.from(records, toTypedRecord);
}

// The PartitionData of `typed` (typedRecords) on the portable path. With `producer`
// ({producerId, producerEpoch, baseSequence}) the leader builds an idempotent batch of them.
function typedPartitionData(partition, typed, producer = null) {
  const data = { partition, typed_records: typed };
  if (producer) {
    data.producer_id = producer.producerId;
    data.producer_epoch = producer.producerEpoch;
    data.base_sequence = producer.baseSequence;
  }
  return data;
}

function toTypedRecord(record) {
  const headers = Array.from(record.headers || [], ([key, value]) => ({ key, value: toBytes(value, true) }));
  // A record without a timestamp (null or undefined; 0 is the epoch) is stamped here, when the
  // application sent it, as Kafka's producers do (the broker would stamp 0 with its own clock as
  // it builds the batch, a retry later); one that is not a time is a RangeError (checks.js).
  // proto3 `optional bytes`: leaving the field out is null, an empty Buffer is empty.
  const timestamp = checkTimestamp(record.timestamp) ?? Date.now();
  const typed = { headers, timestamp_ms: timestamp };
  if (record.key !== null && record.key !== undefined) typed.key = toBytes(record.key, true);
  if (record.value !== null && record.value !== undefined) typed.value = toBytes(record.value, true);
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

module.exports = {
  toBytes,
  murmur2,
  partitionForKey,
  typedRecords,
  typedPartitionData,
  fromTypedRecord,
  partitionResult,
};
