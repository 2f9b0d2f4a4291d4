'use strict';
// The group side of SamsaClient (mixed into its prototype by samsa.js): finding a group's
// coordinator, calling it, reading committed offsets, and joining a group (group.js).

const { check, toInt, withRetries } = require('./errors');
const { GroupMember, groupByTopic, partsOf } = require('./group');

const COORDINATOR_MOVED = new Set([
  'ERROR_CODE_COORDINATOR_LOAD_IN_PROGRESS',
  'ERROR_CODE_COORDINATOR_NOT_AVAILABLE',
  'ERROR_CODE_NOT_COORDINATOR',
]);

const groupMethods = {
  // host:port of the group's coordinator (any broker or controller answers FindCoordinator).
  async findCoordinator(groupId) {
    return withRetries(this.timeoutMs, async () => {
      const answer = await this.callAny('lookup', 'FindCoordinator', {
        key_type: 'COORDINATOR_KEY_TYPE_GROUP',
        keys: [groupId],
      });
      return check(answer.coordinators[0], `group ${groupId}`).endpoint;
    });
  },

  // One call to the group's coordinator, finding it again while it moves or loads; `request`
  // may be a function building each attempt's request (a heartbeat's: see group.js).
  async groupCall(groupId, method, request, errorOf) {
    return withRetries(this.timeoutMs, async () => {
      const endpoint = await this.findCoordinator(groupId);
      const answer = await this.call('group', endpoint, method, typeof request === 'function' ? request() : request);
      const error = errorOf(answer);
      if (error && COORDINATOR_MOVED.has(error.error_code)) check(error, `group ${groupId}`);
      return answer;
    });
  },

  // The group's committed offsets of `partitions` ([{topic, partition}]), as a Map from
  // "topic:partition" to the offset (-1 when nothing was committed). An empty list asks for
  // nothing (an OffsetFetch naming no topic would answer every offset of the group). Asked in
  // requests of at most REQUEST_PARTITIONS_MAX partitions (group.js), the coordinator's limit.
  async committedOffsets(groupId, partitions) {
    const offsets = new Map();
    for (const part of partsOf(partitions)) {
      const topics = [...groupByTopic(part)].map(([topic, numbers]) => ({ topic, partitions: numbers }));
      const answer = await this.groupCall(groupId, 'OffsetFetch', { group_id: groupId, topics }, (a) => a);
      check(answer, `group ${groupId}`);
      for (const t of answer.topics) {
        for (const p of t.partitions) {
          check(p, `${t.name}[${p.partition}]`);
          offsets.set(`${t.name}:${p.partition}`, toInt(p.committed_offset));
        }
      }
    }
    return offsets;
  },

  // Starts a member of `groupId` subscribed to `topics`; see GroupMember. A join that close()
  // overtook leaves again and fails: close() could not see the member, which would otherwise
  // hold its partitions until its session expired.
  async joinGroup(groupId, topics, options = {}) {
    if (this.closing !== null) throw new Error(`the client is closed: group ${groupId} not joined`);
    const member = new GroupMember(this, groupId, topics, options);
    const joining = member.join().then(async () => {
      if (this.closing !== null) {
        await member.leave().catch(() => {});
        throw new Error(`the client was closed while group ${groupId} was joined: left again`);
      }
      this.members.add(member); // until it leaves
    });
    this.joins.add(joining); // close() waits for it
    try {
      await joining;
    } finally {
      this.joins.delete(joining);
    }
    return member;
  },
};

module.exports = { groupMethods };
