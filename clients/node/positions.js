'use strict';
// A consumer's positions (Kafka's consumer position): the next offset to read of each partition
// it reads, and per topic the id (KIP-516) those positions were taken under, so that a topic
// deleted and created again under the same name starts again per auto.offset.reset rather than
// at the old topic's offsets, which mean nothing in the new one (the Python SDK's
// topic_identities.py). A topic's first id is learnt at its first read; a read answered under
// another id (the client describes the topic again on UNKNOWN_TOPIC_ID, and so fetches the new
// topic) returns no record and resets every position of that topic. A position past the log's
// end or before its start (OFFSET_OUT_OF_RANGE: records deleted, or a new topic shorter than
// the old) is reset too, as Kafka's consumer does.

const { SamsaError } = require('./errors');
const { checkOffset, checkPartition } = require('./checks');

const RESETS = new Set(['earliest', 'latest', 'none']);
const OUT_OF_RANGE = 'ERROR_CODE_OFFSET_OUT_OF_RANGE';

const keyOf = (topic, partition) => `${topic}:${partition}`;

class Positions {
  // autoOffsetReset (Kafka's auto.offset.reset): where a partition whose position means nothing
  // starts again: 'earliest' (the log start, the default), 'latest' (the high watermark) or
  // 'none' (the read throws OFFSET_OUT_OF_RANGE and the position stays).
  constructor(client, { autoOffsetReset = 'earliest' } = {}) {
    if (!RESETS.has(autoOffsetReset)) {
      const given = String(autoOffsetReset);
      throw new RangeError(`autoOffsetReset must be 'earliest', 'latest' or 'none', not ${given}`);
    }
    this.client = client;
    this.autoOffsetReset = autoOffsetReset;
    this.offsets = new Map(); // "topic:partition" -> {topic, partition, offset}
    this.topicIds = new Map(); // topic -> the id (hex) its positions were read under
  }

  has(topic, partition) {
    return this.offsets.has(keyOf(topic, partition));
  }

  // The partition's position, or undefined when it has none.
  get(topic, partition) {
    const entry = this.offsets.get(keyOf(topic, partition));
    return entry === undefined ? undefined : entry.offset;
  }

  // Sets the partition's position: where it starts (a committed offset, a seek) or what was
  // processed of it (the last record's offset + 1).
  set(topic, partition, offset) {
    checkPartition(partition);
    checkOffset(offset);
    this.offsets.set(keyOf(topic, partition), { topic, partition, offset });
  }

  // Forgets the partition's position (it was given up); a topic none of whose partitions has
  // one any more is forgotten with its id, as the Python SDK forgets a topic that left the
  // assignment.
  delete(topic, partition) {
    this.offsets.delete(keyOf(topic, partition));
    if (!this.partitionsOf(topic).length) this.topicIds.delete(topic);
  }

  // Every position, as [{topic, partition, offset}] (what a group member commits).
  entries() {
    return [...this.offsets.values()].map((entry) => ({ ...entry }));
  }

  partitionsOf(topic) {
    const entries = [...this.offsets.values()].filter((entry) => entry.topic === topic);
    return entries.map((entry) => entry.partition);
  }

  // Moves the partition's position per autoOffsetReset; with 'none', throws `error`.
  async reset(topic, partition, error) {
    if (this.autoOffsetReset === 'none') throw error;
    const offset = await this.client.listOffset(topic, partition, this.autoOffsetReset);
    if (this.has(topic, partition)) this.set(topic, partition, offset);
  }

  // Fetches the partition from its position (client.fetch), leaving the position where it is:
  // the caller moves it past what it processed (set), or to nextFetchOffset when no record
  // came (offsets may have gaps). Resolves with fetch's {records, nextFetchOffset, highWatermark,
  // topicId}; with no record, and nextFetchOffset the new position, when the position was
  // reset (see the top of this file), or given up or moved while the fetch ran.
  async read(topic, partition, maxWaitMs = 500) {
    const offset = this.get(topic, partition);
    if (offset === undefined) throw new Error(`${topic}[${partition}] has no position to read from`);
    const unread = () => ({ records: [], nextFetchOffset: this.get(topic, partition), highWatermark: -1 });
    let answer;
    try {
      answer = await this.client.fetch(topic, partition, offset, maxWaitMs);
    } catch (error) {
      if (!(error instanceof SamsaError && error.code === OUT_OF_RANGE)) throw error;
      if (this.get(topic, partition) === offset) await this.reset(topic, partition, error);
      return unread();
    }
    if (this.get(topic, partition) !== offset) return unread();
    const known = this.topicIds.get(topic);
    if (known !== undefined && known !== answer.topicId) {
      // The new id is learnt once every position of the topic was reset: until then (a reset
      // that failed, or autoOffsetReset 'none') each read of the topic tries again.
      const detail = `${topic} was deleted and created again (id ${answer.topicId}, was ${known})`;
      const error = new SamsaError(OUT_OF_RANGE, `${detail}: its positions mean nothing in the new topic`);
      for (const p of this.partitionsOf(topic)) await this.reset(topic, p, error);
      this.topicIds.set(topic, answer.topicId);
      return unread();
    }
    this.topicIds.set(topic, answer.topicId);
    return answer;
  }
}

module.exports = { Positions };
