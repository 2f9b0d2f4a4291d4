'use strict';
// A consumer-group member on the server-side assignment protocol (KIP-848).

const crypto = require('node:crypto');
const { NO_ERROR, check, isRetried, sleep } = require('./errors');
const { checkOffset, checkPartition } = require('./checks');

const REJOIN = new Set(['ERROR_CODE_UNKNOWN_MEMBER_ID', 'ERROR_CODE_FENCED_MEMBER_EPOCH']);
// The most partitions one OffsetCommit or OffsetFetch may name (common/limits.py
// request_partitions_max): the coordinator refuses more (RESOURCE_EXHAUSTED), and more topic
// entries too, which a part of at most this many partitions cannot hold.
const REQUEST_PARTITIONS_MAX = 10000;

// A commit's records are written as one batch of __consumer_offsets, and the coordinator refuses
// (RESOURCE_EXHAUSTED) a commit over this bound on their bytes, computed from the names alone
// (services/coordinator/group_offsets.py commit_size_problem; these numbers mirror
// common/limits.py offset_commit_record_overhead_bytes_max, offset_commit_batch_overhead_bytes
// and offset_commit_batch_bytes_max):
//   COMMIT_BATCH_OVERHEAD_BYTES + group id bytes
//     + per partition (group id + topic name + metadata bytes + COMMIT_RECORD_OVERHEAD_BYTES_MAX)
//   <= COMMIT_BATCH_BYTES_MAX (UTF-8 bytes; this client commits no metadata).
const COMMIT_RECORD_OVERHEAD_BYTES_MAX = 96;
const COMMIT_BATCH_OVERHEAD_BYTES = 1024;
const COMMIT_BATCH_BYTES_MAX = 1048588; // 1 MiB + 12, Kafka's max.message.bytes default

// `list` in runs, in order, of at most REQUEST_PARTITIONS_MAX and, given `sizeOf` (an entry's
// size), of at most `sizeMax` in all (an entry larger than that goes alone): one request each.
function partsOf(list, sizeOf = () => 0, sizeMax = 0) {
  const parts = [];
  let total = 0;
  for (const entry of list) {
    const size = sizeOf(entry);
    const last = parts[parts.length - 1];
    if (!last || last.length >= REQUEST_PARTITIONS_MAX || total + size > sizeMax) {
      parts.push([]);
      total = 0;
    }
    parts[parts.length - 1].push(entry);
    total += size;
  }
  return parts;
}

// The entries of a commit ([{topic, partition, offset}]) in the requests it goes in, in order:
// at most REQUEST_PARTITIONS_MAX each, and under the coordinator's byte bound (see above).
function commitPartsOf(groupId, entries) {
  const groupBytes = Buffer.byteLength(groupId, 'utf8');
  const topicBytes = new Map();
  const sizeOf = ({ topic }) => {
    if (!topicBytes.has(topic)) topicBytes.set(topic, Buffer.byteLength(topic, 'utf8'));
    return groupBytes + topicBytes.get(topic) + COMMIT_RECORD_OVERHEAD_BYTES_MAX;
  };
  const sizeMax = COMMIT_BATCH_BYTES_MAX - COMMIT_BATCH_OVERHEAD_BYTES - groupBytes;
  return partsOf(entries, sizeOf, sizeMax);
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

// Resolves once `promise` settled or `ms` passed, whichever comes first; never rejects.
function settleWithin(promise, ms) {
  let timer;
  const expired = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([Promise.resolve(promise).catch(() => {}), expired]).finally(() => clearTimeout(timer));
}

function samePartitions(a, b) {
  const key = (list) => list.map((tp) => `${tp.topic}:${tp.partition}`).sort().join(',');
  return key(a) === key(b);
}

// A consumer-group member (KIP-848): it heartbeats in the background every
// heartbeat_interval_ms and owns what the last answer assigned. The coordinator computes every
// assignment; the member only reports what it owns when that changes.
//
// onRevoke (optional), Kafka's onPartitionsRevoked: an async function called with the
// partitions ([{topic, partition}]) the coordinator takes away, before the member gives them
// up. Until it settles the member still owns them (it may commit them: the coordinator hands
// them to another member only once this one reported them gone) and heartbeats on; then it
// owns the coordinator's latest assignment and reports it. It should finish within
// rebalanceTimeoutMs, after which the coordinator removes the member. Without it, partitions
// taken away are given up at once. Partitions lost by a fenced member (UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH: another member may own them already) are dropped without a call.
class GroupMember {
  constructor(client, groupId, topics, { rebalanceTimeoutMs = 30000, onRevoke = null } = {}) {
    this.client = client;
    this.groupId = groupId;
    this.topics = topics;
    this.rebalanceTimeoutMs = rebalanceTimeoutMs;
    this.onRevoke = onRevoke;
    this.memberId = crypto.randomUUID(); // made once, kept across rejoins
    this.memberEpoch = 0;
    this.assignment = []; // [{topic, partition}] the member owns now
    this.target = []; // what the coordinator last assigned
    this.revoking = null; // onRevoke's Promise, while it runs
    this.ownedChanged = true; // owned_partitions must be sent (join: empty)
    this.ownedVersion = 0; // counts assignment changes, so a report in flight is not taken for a later one
    this.intervalMs = 1000;
    this.timer = null;
    this.beating = null; // the heartbeat in flight
    this.inFlight = false; // a heartbeat is being sent (not only scheduled)
    this.error = null; // a heartbeat error that stopped the member
    this.lastError = null; // the last heartbeat failure that did not stop it
    this.listeners = [];
    this.stopped = false;
    this.committing = Promise.resolve(); // the last commit's end: commits run one at a time
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
    // Unset means "unchanged". Required on every join (coordinator.proto), also a rejoin after
    // a fence that found the member owning nothing, when nothing "changed".
    if (this.ownedChanged || this.memberEpoch === 0) {
      request.owned_partitions = toOwnedPartitions(this.assignment);
    }
    return request;
  }

  async heartbeat() {
    let sentOwned = false;
    let sentVersion = 0;
    let attempts = 0;
    // Built for each attempt: groupCall sends the heartbeat again after the coordinator moved
    // or did not answer, and the attempt before may have been applied with its answer lost
    // (the epoch moved on). The coordinator then takes the previous epoch only with
    // owned_partitions, so a retry reports them, as after a failed heartbeat (see schedule).
    const build = () => {
      if (attempts > 0) this.ownedChanged = true;
      attempts += 1;
      sentOwned = this.ownedChanged;
      sentVersion = this.ownedVersion;
      return this.request();
    };
    const answer = await this.client.groupCall(this.groupId, 'ConsumerGroupHeartbeat', build, (a) => a);
    if (REJOIN.has(answer.error_code)) {
      // Drop every partition without committing and join again with epoch 0. A revocation
      // under way is abandoned: what it would give up is gone already (its callback's commits
      // are refused, the member owning nothing), and the new assignment must not wait for it.
      this.memberEpoch = 0;
      this.target = [];
      this.revoking = null;
      this.setAssignment([]);
      return;
    }
    check(answer, `group ${this.groupId}`);
    if (sentOwned && sentVersion === this.ownedVersion) this.ownedChanged = false;
    this.memberEpoch = answer.member_epoch;
    this.intervalMs = answer.heartbeat_interval_ms || this.intervalMs;
    // The answer is always the full set (never a change); unset on error only.
    if (answer.assignment) this.onTarget(fromOwnedPartitions(answer.assignment));
  }

  // The coordinator's assignment: owned at once, unless it takes partitions away and onRevoke
  // is given, which runs first (see the class comment); a target that comes meanwhile is
  // applied when it settled.
  onTarget(partitions) {
    this.target = partitions;
    if (this.revoking) return;
    const kept = new Set(partitions.map((tp) => `${tp.topic}:${tp.partition}`));
    const revoked = this.assignment.filter((tp) => !kept.has(`${tp.topic}:${tp.partition}`));
    if (revoked.length === 0 || !this.onRevoke || this.stopped) {
      this.setAssignment(partitions);
      return;
    }
    const revoking = Promise.resolve()
      .then(() => this.onRevoke(revoked))
      .catch((error) => {
        this.lastError = error; // the partitions are given up all the same
      })
      .then(() => {
        if (this.revoking !== revoking) return; // abandoned: the member was fenced meanwhile
        this.revoking = null;
        // Given up, also when the member is leaving meanwhile: leave() then revokes only what
        // is left (onRevoke is never called twice for a partition).
        const given = new Set(revoked.map((tp) => `${tp.topic}:${tp.partition}`));
        this.setAssignment(this.assignment.filter((tp) => !given.has(`${tp.topic}:${tp.partition}`)));
        if (this.stopped) return; // left or failed meanwhile: it takes nothing new
        this.onTarget(this.target); // the latest target: what came, and what else went meanwhile
        // Report at once rather than an interval later (a heartbeat in flight reschedules).
        if (this.ownedChanged && !this.inFlight) {
          this.schedule(0);
        }
      });
    this.revoking = revoking;
  }

  setAssignment(partitions) {
    if (samePartitions(partitions, this.assignment)) return;
    this.assignment = partitions;
    this.ownedChanged = true;
    this.ownedVersion += 1;
    for (const listener of this.listeners) listener(partitions);
  }

  // Heartbeats again after `delayMs`, by default at once when the assignment changed (so the
  // group reaches its target sooner), else after the coordinator's interval. A heartbeat that
  // failed on what passes (the coordinator moving, loading or unreachable for longer than the
  // client's timeout, a call past its deadline or cut off: errors.js TRANSIENT_STATUSES) is sent
  // again an interval later and the member keeps its partitions, as Kafka's consumer does: the
  // coordinator holds its session, and fences it (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH:
  // rejoin) once that expired. Any other failure stops the member (see stop).
  //
  // One heartbeat loop: a timer still pending is replaced, not joined by a second one. A
  // revocation that settles between a heartbeat's end and its scheduling the next (an onRevoke
  // that returns at once) schedules one too, and two timers would each go on heartbeating.
  schedule(delayMs = this.ownedChanged ? 0 : this.intervalMs) {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.stopped) return;
      this.inFlight = true;
      this.beating = this.heartbeat()
        .finally(() => {
          this.inFlight = false;
        })
        .then(() => {
          this.lastError = null;
          this.schedule();
        })
        .catch((error) => {
          if (this.stopped) return;
          if (isRetried(error)) {
            this.lastError = error;
            // The answer may have been lost after the coordinator moved the member's epoch on:
            // it then takes the old epoch only with owned_partitions (within what it assigned),
            // so the next heartbeat reports them, as Kafka's sends every field after a failure.
            this.ownedChanged = true;
            this.schedule(this.intervalMs);
          } else this.stop(error);
        });
    }, delayMs);
  }

  // Ends a member whose heartbeat failed for good (GROUP_MAX_SIZE_REACHED, an invalid request,
  // the client closed): it heartbeats no more, so the coordinator gives its partitions to
  // others once its session expires, and it drops them now rather than read on beside their
  // next owner. `error` says why; waitForAssignment throws it.
  stop(error) {
    this.error = error;
    this.stopped = true;
    this.setAssignment([]);
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
  // Only partitions the member owns now may be committed: one the coordinator took away was
  // given up at the next heartbeat and may belong to another member, whose commits this one
  // would overwrite (the coordinator checks the member epoch, not ownership). So a commit
  // naming such a partition is refused whole, before anything is sent. A commit goes in
  // requests of at most REQUEST_PARTITIONS_MAX partitions whose records fit one batch (the
  // coordinator's limits, commitPartsOf), one after the other in the order given, and stops at
  // the first that failed (those before it stay committed). Commits run one at a time in call
  // order, as Kafka's commitSync waits for those before it: a later part of an older commit
  // never lands over a newer commit's offsets. An offset that is not an integer >= 0 (or a
  // partition that is not one) is a RangeError, and nothing of the commit is sent.
  async commit(offsets) {
    const entries = offsets instanceof Map
      ? [...offsets].map(([key, offset]) => {
          const at = key.lastIndexOf(':');
          return { topic: key.slice(0, at), partition: Number(key.slice(at + 1)), offset };
        })
      : [...offsets]; // as given now, whenever the commits before it let it run
    for (const { partition, offset } of entries) {
      checkPartition(partition); // a RangeError, as Kafka's OffsetAndMetadata refuses one < 0
      checkOffset(offset); // the encoder would send NaN or undefined as 0: a rewind
    }
    const run = async () => {
      this.checkOwned(entries);
      for (const part of commitPartsOf(this.groupId, entries)) await this.commitPart(part);
    };
    const done = this.committing.then(run);
    this.committing = done.catch(() => {}); // the next commit runs whether this one failed or not
    return done;
  }

  // One OffsetCommit of `entries` (a part of commitPartsOf), sent again at the member's
  // new epoch after STALE_MEMBER_EPOCH.
  async commitPart(entries) {
    const byTopic = new Map();
    for (const { topic, partition, offset } of entries) {
      if (!byTopic.has(topic)) byTopic.set(topic, []);
      byTopic.get(topic).push({ partition, committed_offset: offset, committed_leader_epoch: -1 });
    }
    const topics = [...byTopic].map(([name, partitions]) => ({ name, partitions }));
    const firstError = (answer) => {
      for (const t of answer.topics) {
        const failed = t.partitions.find((p) => p.error_code !== NO_ERROR);
        if (failed) return { ...failed, error_message: `${t.name}[${failed.partition}] ${failed.error_message}` };
      }
      return null;
    };
    const deadline = Date.now() + this.client.timeoutMs;
    for (;;) {
      this.checkOwned(entries);
      const memberEpoch = this.memberEpoch;
      const request = { group_id: this.groupId, member_id: this.memberId, member_epoch: memberEpoch, topics };
      const answer = await this.client.groupCall(this.groupId, 'OffsetCommit', request, firstError);
      const failed = firstError(answer);
      if (!failed) return;
      // STALE_MEMBER_EPOCH: the coordinator moved the member to a newer epoch (its assignment
      // changed), which the member learns from its next heartbeat; then it commits again, at
      // that epoch, what it still owns, as Kafka's consumer does. Anything else fails the commit.
      if (failed.error_code === 'ERROR_CODE_STALE_MEMBER_EPOCH') {
        while (this.memberEpoch === memberEpoch && !this.stopped && Date.now() < deadline) await sleep(20);
      }
      if (failed.error_code !== 'ERROR_CODE_STALE_MEMBER_EPOCH' || this.memberEpoch === memberEpoch) {
        check(failed, `commit for group ${this.groupId}`);
      }
    }
  }

  // Throws unless the member owns every partition of `entries` ([{topic, partition}]).
  checkOwned(entries) {
    const owned = new Set(this.assignment.map((tp) => `${tp.topic}:${tp.partition}`));
    const notOwned = entries.filter((tp) => !owned.has(`${tp.topic}:${tp.partition}`));
    if (notOwned.length > 0) {
      const names = notOwned.map((tp) => `${tp.topic}[${tp.partition}]`).join(', ');
      throw new Error(`group ${this.groupId}: no commit, the member does not own ${names}`);
    }
  }

  // Leaves the group (member epoch -1): its partitions are reassigned at once. With onRevoke,
  // it is called first with every partition the member owns, as Kafka's consumer does on
  // close, so that the application may commit them; the member waits for it (and for one
  // already running) at most rebalanceTimeoutMs each, so a callback that never settles cannot
  // hold close() for ever. The member owns nothing afterwards, whether or not the coordinator
  // answered.
  async leave() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = null;
    await this.beating;
    await settleWithin(this.revoking, this.rebalanceTimeoutMs);
    try {
      if (this.onRevoke && this.assignment.length > 0) {
        const revoking = Promise.resolve()
          .then(() => this.onRevoke(this.assignment.slice()))
          .catch((error) => {
            this.lastError = error; // the member leaves all the same
          });
        await settleWithin(revoking, this.rebalanceTimeoutMs);
      }
      this.memberEpoch = -1;
      const answer = await this.client.groupCall(
        this.groupId,
        'ConsumerGroupHeartbeat',
        { group_id: this.groupId, member_id: this.memberId, member_epoch: -1 },
        (a) => a,
      );
      check(answer, `leaving group ${this.groupId}`);
    } finally {
      this.client.members.delete(this);
      this.setAssignment([]);
    }
  }
}

module.exports = { GroupMember, groupByTopic, partsOf };
