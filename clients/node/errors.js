'use strict';
// Samsa's ErrorCodes as this client raises them, and its retry loop.

const grpc = require('@grpc/grpc-js');

const NO_ERROR = 'ERROR_CODE_UNSPECIFIED';
// The codes errors.proto marks "Retriable: yes", as common/errors.py RETRIABLE lists them
// (tests/unit/client/test_node_errors.py keeps the three equal): a SamsaError's `retriable`.
// Asking again may succeed; what a call retries on its own is its choice, since some of these
// leave the outcome unknown (a non-idempotent produce retries only MAYBE_WRITTEN's complement)
// and one means another thing where it is answered (a Fetch's CORRUPT_MESSAGE).
const RETRIABLE = new Set([
  'ERROR_CODE_CORRUPT_MESSAGE',
  'ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION',
  'ERROR_CODE_LEADER_NOT_AVAILABLE',
  'ERROR_CODE_NOT_LEADER_OR_FOLLOWER',
  'ERROR_CODE_REQUEST_TIMED_OUT',
  'ERROR_CODE_REPLICA_NOT_AVAILABLE',
  'ERROR_CODE_NETWORK_EXCEPTION',
  'ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS',
  'ERROR_CODE_COORDINATOR_NOT_AVAILABLE',
  'ERROR_CODE_NOT_COORDINATOR',
  'ERROR_CODE_NOT_ENOUGH_REPLICAS',
  'ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND',
  'ERROR_CODE_NOT_CONTROLLER',
  'ERROR_CODE_CONCURRENT_TRANSACTIONS',
  'ERROR_CODE_KAFKA_STORAGE_ERROR',
  'ERROR_CODE_FETCH_SESSION_ID_NOT_FOUND',
  'ERROR_CODE_INVALID_FETCH_SESSION_EPOCH',
  'ERROR_CODE_FENCED_LEADER_EPOCH',
  'ERROR_CODE_UNKNOWN_LEADER_EPOCH',
  'ERROR_CODE_OFFSET_NOT_AVAILABLE',
  'ERROR_CODE_ELIGIBLE_LEADERS_NOT_AVAILABLE',
  'ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE',
  'ERROR_CODE_UNSTABLE_OFFSET_COMMIT',
  'ERROR_CODE_UNKNOWN_TOPIC_ID', // the topic was created again: leaderOf reads its new id
]);
// The retriable codes of a write whose records may have been written (and may still be
// committed): a retry may store them twice, unless the leader dedupes it by its producer id
// and sequence (an idempotent produce).
const MAYBE_WRITTEN = new Set([
  'ERROR_CODE_REQUEST_TIMED_OUT',
  'ERROR_CODE_NETWORK_EXCEPTION',
  'ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND',
]);

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

// The gRPC statuses of a call that got no answer, after which another attempt may succeed, as
// the Python SDK takes them (producer_ids.py INIT_RETRIABLE_STATUSES; its metadata, coordinator,
// fetch and heartbeat calls retry these too): the server unreachable or the connection dropped
// (UNAVAILABLE, also a server's bound on requests in progress), no answer in time
// (DEADLINE_EXCEEDED), the call cut off by a server stopping (CANCELLED) or killed mid-call
// (INTERNAL, UNKNOWN). Not RESOURCE_EXHAUSTED nor INVALID_ARGUMENT: the server refused the
// request as sent (over a limit, or malformed), and sent again it is refused again.
const TRANSIENT_STATUSES = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.DEADLINE_EXCEEDED,
  grpc.status.CANCELLED,
  grpc.status.INTERNAL,
  grpc.status.UNKNOWN,
]);

// Whether asking again may succeed: a retriable SamsaError, or a call that got no answer
// (TRANSIENT_STATUSES). What withRetries retries by default; not for calls that may have
// written something and must not be sent twice.
function isRetried(error) {
  return Boolean(error.retriable) || TRANSIENT_STATUSES.has(error.code);
}

// Runs `attempt` until it returns, retrying the errors `retried` accepts with a growing backoff
// until `timeoutMs` passed; then throws the last error.
async function withRetries(timeoutMs, attempt, retried = isRetried) {
  return retryUntil(Date.now() + timeoutMs, attempt, retried);
}

// withRetries up to `deadline` (a Date.now() time): no attempt starts after it. The first
// attempt is always made.
async function retryUntil(deadline, attempt, retried = isRetried) {
  for (let backoff = 100; ; backoff = Math.min(backoff * 2, 1000)) {
    try {
      return await attempt();
    } catch (error) {
      if (!retried(error) || Date.now() + backoff > deadline) throw error;
      await sleep(backoff);
    }
  }
}

module.exports = {
  NO_ERROR,
  MAYBE_WRITTEN,
  RETRIABLE,
  SamsaError,
  TRANSIENT_STATUSES,
  check,
  isRetried,
  retryUntil,
  toInt,
  sleep,
  withRetries,
};
