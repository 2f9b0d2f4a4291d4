'use strict';
// The public API's arguments, checked before anything is sent. The proto's encoder takes what
// it is given as best it can (NaN or undefined as 0, 'all' as 0, 1.5 as 1), so a wrong argument
// would otherwise be sent as another, valid one: acks 'all' as acks 0, a NaN offset as offset 0.
// Kafka refuses these in the producer and consumer calls (ProducerRecord's partition and
// timestamp, seek's offset, the acks config), and so does this client, with a RangeError naming
// the argument.

const INT32_MAX = 2 ** 31 - 1;
// Kafka's acks config spells -1 'all'; a string of a number is that number.
const ACKS_NAMES = new Map([
  ['all', -1],
  ['-1', -1],
  ['0', 0],
  ['1', 1],
]);

// A partition number: an integer from 0 to 2^31 - 1 (an int32 on the wire).
function checkPartition(partition) {
  if (!Number.isInteger(partition) || partition < 0 || partition > INT32_MAX) {
    throw new RangeError(`partition must be an integer >= 0, not ${String(partition)}`);
  }
  return partition;
}

// A log offset: an integer from 0 to 2^53 - 1 (offsets are Numbers in this client), or -1
// where `allowLatest` says -1 has a meaning (DeleteRecords: up to the high watermark).
function checkOffset(offset, allowLatest = false) {
  const latest = allowLatest && offset === -1;
  if (!latest && !(Number.isSafeInteger(offset) && offset >= 0)) {
    throw new RangeError(`offset must be an integer >= 0${allowLatest ? ' or -1' : ''}, not ${String(offset)}`);
  }
  return offset;
}

// A record's timestamp in milliseconds since the epoch: an integer from 0 to 2^53 - 1, as Kafka's
// ProducerRecord and the Python SDK take it (0 is a time like any other); null or undefined is
// none, for the client to stamp.
function checkTimestamp(timestamp) {
  if (timestamp === null || timestamp === undefined) return timestamp;
  if (!(Number.isSafeInteger(timestamp) && timestamp >= 0)) {
    throw new RangeError(`timestamp must be an integer >= 0 (ms) or null, not ${String(timestamp)}`);
  }
  return timestamp;
}

// Produce's acks as the number the proto carries: 'all' is -1. An integer goes as it is (the
// leader refuses one but -1, 0 and 1 with INVALID_REQUIRED_ACKS); anything else is refused.
function checkAcks(acks) {
  if (ACKS_NAMES.has(acks)) return ACKS_NAMES.get(acks);
  if (!Number.isInteger(acks) || acks < -(2 ** 31) || acks > INT32_MAX) {
    throw new RangeError(`acks must be -1 ('all'), 0 or 1, not ${String(acks)}`);
  }
  return acks;
}

// A duration in milliseconds, an option of the client: a finite Number > 0 (a string would be
// concatenated to Date.now(), not added).
function checkMs(name, ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw new RangeError(`${name} must be a number of milliseconds > 0, not ${String(ms)}`);
  }
  return ms;
}

module.exports = { checkAcks, checkMs, checkOffset, checkPartition, checkTimestamp };
