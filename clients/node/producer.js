'use strict';
// The produce side of SamsaClient (mixed into its prototype by samsa.js): typed produce on the
// portable path, idempotent by default (KIP-98).

const grpc = require('@grpc/grpc-js');
const {
  MAYBE_WRITTEN,
  NO_ERROR,
  RETRIABLE,
  SamsaError,
  check,
  retryUntil,
  toInt,
  withRetries,
} = require('./errors');
const { partitionForKey, typedPartitionData, typedRecords } = require('./records');
const { checkAcks, checkPartition, checkTimestamp } = require('./checks');

const SEQUENCE_MODULUS = 2 ** 31; // base_sequence is an int32 that wraps to 0 after 2^31 - 1
const PRODUCER_EPOCH_MAX = 2 ** 15 - 1; // the epoch is an int16 (Kafka's Short.MAX_VALUE)
const UNKNOWN_PRODUCER_ID = 'ERROR_CODE_UNKNOWN_PRODUCER_ID';
const INVALID_PRODUCER_EPOCH = 'ERROR_CODE_INVALID_PRODUCER_EPOCH';
// The retriable partition errors after which the leader has written nothing of the request:
// what a produce without a sequence retries.
const RETRIABLE_UNWRITTEN = new Set([...RETRIABLE].filter((code) => !MAYBE_WRITTEN.has(code)));
// The partition errors after which the leader has written nothing of the request.
const WROTE_NOTHING = new Set([...RETRIABLE_UNWRITTEN, UNKNOWN_PRODUCER_ID]);
// The gRPC statuses of an attempt that got no answer, which an idempotent produce sends again
// with the same sequence (the leader dedupes it if the first was written), as the Python SDK's
// producer retries them (produce_stream.py STREAM_RETRIABLE_STATUSES): the server unreachable
// or the connection dropped (UNAVAILABLE), no answer within the call's deadline
// (DEADLINE_EXCEEDED, which the Python SDK's producer takes for REQUEST_TIMED_OUT), the call cut
// off by a server stopping (CANCELLED) or killed mid-call (INTERNAL).
const UNANSWERED = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.CANCELLED,
  grpc.status.INTERNAL,
]);
// What a produce without a sequence sends again of those: a call cut off, not one past its
// deadline, which it takes as the leader's REQUEST_TIMED_OUT (MAYBE_WRITTEN: not retried).
const CUT_OFF = new Set([...UNANSWERED].filter((status) => status !== grpc.status.DEADLINE_EXCEEDED));

const producerMethods = {
  // Appends records ([{key, value, headers: [[k, v]], timestamp}], strings or bytes) to one
  // partition through its leader; resolves with the offset of the first (-1 with acks 0). The
  // records are taken as they are when produce() is called (bytes copied, timestamps stamped):
  // the application may reuse its arrays and buffers at once, before the call settled.
  //
  // With acks -1 and idempotence on (the default, as in Kafka >= 3.0), each call is written at
  // most once even though it is retried: it carries this client's producer id, epoch and a
  // sequence per partition (KIP-98), and the leader answers a retry of a write it already holds
  // (a lost answer, REQUEST_TIMED_OUT, ...) with the first write's offsets instead of storing it
  // again. The calls to one partition reach it one at a time, in the order they were made, so
  // records are stored in call order. What it does not promise: a call that fails (rejects) may
  // or may not have been written; resending it is the caller's choice, and may store it twice.
  // With acks 0 or 1, or `idempotence: false`, a retry after a lost answer may store it twice.
  //
  // A call settles within about deliveryTimeoutMs (Kafka's delivery.timeout.ms) of being made,
  // its wait behind the earlier calls to its partition included: attempts are retried until
  // then, and the last one's gRPC deadline is cut short so as not to pass it. A call still
  // queued then fails with REQUEST_TIMED_OUT, unsent.
  //
  // acks: -1 (or Kafka's 'all'), 0 or 1. A partition that is not an integer >= 0, or acks not
  // an integer, is a RangeError (checks.js).
  async produce(topic, partition, records, acks = -1) {
    checkPartition(partition);
    acks = checkAcks(acks);
    const typed = typedRecords(records); // as they are now, whenever they are sent
    const deadline = Date.now() + this.deliveryTimeoutMs;
    if (acks === -1 && this.idempotence) {
      return this.produceIdempotent(topic, partition, typed, deadline);
    }
    // Without a sequence, only what says nothing was written is retried (and a call cut off:
    // a lost answer, which README says may store the records twice).
    const data = typedPartitionData(partition, typed);
    const retried = (error) =>
      error instanceof SamsaError ? RETRIABLE_UNWRITTEN.has(error.code) : CUT_OFF.has(error.code);
    return retryUntil(deadline, () => this.sendProduce(topic, data, acks, deadline), retried);
  },

  // One Produce of one PartitionData to its partition's leader (found again at every call);
  // resolves with the base offset, throws a SamsaError for the partition's error. The call's
  // gRPC deadline is twice the leader's timeout_ms, or `deadline` if sooner.
  async sendProduce(topic, data, acks, deadline = Infinity) {
    const leader = await this.leaderOf(topic, data.partition);
    // The topic's id (KIP-516): a broker still hosting a deleted topic of this name refuses.
    const topics = [{ name: topic, topic_id: Buffer.from(leader.topicId, 'hex'), partitions: [data] }];
    const request = { acks, timeout_ms: this.timeoutMs, topics };
    const callMs = Math.max(Math.min(2 * this.timeoutMs, deadline - Date.now()), 1);
    const answer = await this.call('broker', leader.endpoint, 'Produce', request, callMs);
    const result = check(this.leaderResult(answer, topic, data.partition, leader), `${topic}[${data.partition}]`);
    return toInt(result.base_offset);
  },

  // produce() with acks -1 and a producer id, settled by `deadline`. The base_sequence is fixed
  // before the retry loop, so every retry sends the identical request, which the leader
  // dedupes: a retriable error, or no answer at all (UNANSWERED: the attempt may have been
  // written), is sent again until the deadline, as Kafka's idempotent producer retries within
  // delivery.timeout.ms. A call that failed for good resets the producer's sequences under a
  // new epoch (resetProducer).
  //
  // UNKNOWN_PRODUCER_ID means the leader holds no state for this producer id (it expired after
  // producer.id.expiration.ms without a write, or its batches were deleted), so it refuses any
  // sequence but 0. When no attempt of the call may have been written, the call is sent once
  // more under the bumped epoch from sequence 0, as Kafka's producer resets (KIP-360), rather
  // than failing a write after a quiet spell.
  produceIdempotent(topic, partition, typed, deadline) {
    const key = `${topic}:${partition}`;
    const retried = (error) => Boolean(error.retriable) || UNANSWERED.has(error.code);
    return this.inPartitionOrder(key, async () => {
      if (Date.now() >= deadline) {
        // Nothing was sent: the sequences stay as they are.
        const waited = `not sent within deliveryTimeoutMs (${this.deliveryTimeoutMs} ms)`;
        throw new SamsaError('ERROR_CODE_REQUEST_TIMED_OUT', `${topic}[${partition}] ${waited}`);
      }
      for (let renewed = false; ; renewed = true) {
        const identity = this.producerIdentity();
        const producer = await identity;
        const baseSequence = producer.sequences.get(key) || 0;
        const data = typedPartitionData(partition, typed, { ...producer, baseSequence });
        let maybeWritten = false;
        try {
          const baseOffset = await retryUntil(deadline, async () => {
            try {
              return await this.sendProduce(topic, data, -1, deadline);
            } catch (error) {
              // Only these codes say the leader wrote nothing; an attempt answered otherwise, or
              // not answered, may have been written.
              if (!(error instanceof SamsaError && WROTE_NOTHING.has(error.code))) maybeWritten = true;
              throw error;
            }
          }, retried);
          producer.sequences.set(key, (baseSequence + typed.length) % SEQUENCE_MODULUS);
          return baseOffset;
        } catch (error) {
          this.resetProducer(identity, producer, error);
          const unknown = error instanceof SamsaError && error.code === UNKNOWN_PRODUCER_ID;
          if (!unknown || maybeWritten || renewed) throw error;
        }
      }
    });
  },

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
  },

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
  },

  // Resets the producer's sequences after a produce made with `identity` (the Promise
  // producerIdentity() gave, resolved to `producer`) failed for good with `error`: the next
  // produce starts every partition at sequence 0 under the epoch after this one, with the same
  // producer id, as Kafka's idempotent producer bumps its own epoch (KIP-360, broker.proto
  // InitProducerIdResponse; the Python SDK's bumped_producer_epoch): a leader takes a known
  // producer id's higher epoch from sequence 0 as a fresh start, and one that forgot the id takes
  // sequence 0 of any epoch. OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID mean the leader
  // cannot go on with these sequences; and after any other failure (retries exhausted on a
  // timeout, an unreachable leader) the records may or may not have been written, so sending
  // other records with the same sequence could be taken for a retry and silently dropped. The new
  // epoch continues nothing (no record of the failed call is assumed written, and the caller
  // decides whether to resend), and it fences the old one: an attempt of the failed call still
  // on its way to the leader is refused (INVALID_PRODUCER_EPOCH) once the new epoch wrote there,
  // rather than written after later calls. A new producer id is asked for instead (the next
  // produce calls InitProducerId) when the epoch cannot go higher, or after
  // INVALID_PRODUCER_EPOCH: a newer epoch of this id exists, and ours may not pass it. Produces
  // already under way with the old identity finish with it, and a second failure of it resets
  // nothing more.
  resetProducer(identity, producer, error) {
    if (this.producer !== identity) return;
    const fenced = error instanceof SamsaError && error.code === INVALID_PRODUCER_EPOCH;
    if (fenced || producer.producerEpoch >= PRODUCER_EPOCH_MAX) {
      this.producer = null;
      return;
    }
    const { producerId } = producer;
    const producerEpoch = producer.producerEpoch + 1;
    this.producer = Promise.resolve({ producerId, producerEpoch, sequences: new Map() });
  },

  // A new idempotent producer identity from any broker (InitProducerId with no transactional
  // id): {producerId (a decimal string, as int64s arrive), producerEpoch}.
  async initProducerId() {
    const answer = await withRetries(this.timeoutMs, async () =>
      check(await this.callAny('broker', 'InitProducerId', { transactional_id: '' }), 'InitProducerId'),
    );
    return { producerId: answer.producer_id, producerEpoch: answer.producer_epoch };
  },

  // For tests of the broker's deduplication: sends one typed PartitionData once (no retry,
  // no sequence bookkeeping), with `producer` ({producerId, producerEpoch, baseSequence}) or
  // without, and resolves with {errorCode, baseOffset} as the leader answered.
  async produceOnce(topic, partition, records, { acks = -1, producer = null } = {}) {
    const data = typedPartitionData(partition, typedRecords(records), producer);
    try {
      return { errorCode: NO_ERROR, baseOffset: await this.sendProduce(topic, data, acks) };
    } catch (error) {
      if (!(error instanceof SamsaError)) throw error;
      return { errorCode: error.code, baseOffset: null };
    }
  },

  // Appends records to the partitions their keys choose (partitionForKey, as every Samsa and
  // Kafka client does); records without a key all go to one partition picked at random for the
  // call (Kafka's sticky partitioner does the same per batch). Resolves with one
  // {partition, baseOffset, count} per partition written, in partition order. A record whose
  // timestamp is not one is a RangeError before any partition is written.
  async produceByKey(topic, records, acks = -1) {
    records = Array.from(records);
    for (const record of records) checkTimestamp(record.timestamp);
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
  },
};

module.exports = { producerMethods };
