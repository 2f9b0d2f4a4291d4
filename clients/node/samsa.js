'use strict';
// A small Samsa client for Node.js, built from proto/samsa/v1 alone (no batch codec): it
// produces typed records, fetches decoded ones, and joins consumer groups with the
// server-side assignment protocol (ConsumerGroupHeartbeat). It bootstraps from brokers (or
// controllers): they answer metadata reads and forward admin writes.

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { NO_ERROR, SamsaError, check, isRetried, toInt, withRetries } = require('./errors');
const { murmur2, partitionForKey, fromTypedRecord, partitionResult } = require('./records');
const { GroupMember } = require('./group');
const { groupMethods } = require('./group_calls');
const { producerMethods } = require('./producer');
const { Positions } = require('./positions');
const { checkMs, checkOffset, checkPartition } = require('./checks');
const { TlsConfigError, channelCredentials, missingCertificateHint, tlsLocations } = require('./tls');
const { SaslLogin, exchange, saslChannelCredentials, saslSettings } = require('./sasl');

const PROTO_ROOT = path.resolve(__dirname, '..', '..', 'proto');
const PROTO_FILES = ['broker.proto', 'controller.proto', 'coordinator.proto', 'security.proto'].map((name) =>
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

const MAX_MESSAGE_BYTES = 80 * 1024 * 1024 + 1024 * 1024;
// The most partitions a DescribeTopics answer may carry (common/limits.py
// describe_topics_partitions_max, every partition of the largest topic); a server lowers a
// larger partition_limit to its own maximum, and answers a cursor to go on from.
const DESCRIBE_PARTITIONS_MAX = 10000;

// Kafka's delivery.timeout.ms default: a produce() call's time in all, retries included.
const DELIVERY_TIMEOUT_MS = 120000;
// The metadata key that names a client to the servers (metadata/client_quotas.py
// CLIENT_ID_METADATA_KEY): brokers hold its produces and fetches to the client quotas of that id
// (KIP-13). An id longer than common/limits.py client_id_length_max would be counted under the
// default entity, where no quota can name it: refused here, as the Python SDK's config does.
const CLIENT_ID_METADATA_KEY = 'samsa-client-id';
const CLIENT_ID_LENGTH_MAX = 255;
// Kafka's default client ids count the clients of a process ("producer-1", "consumer-2"): a
// SamsaClient without clientId is "samsa-node-N", N counting this process's SamsaClients from 1.
let clientsMade = 0;

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
      sasl: v1.SaslService,
    };
  }
  return services;
}

function splitEndpoints(bootstrap) {
  const list = Array.isArray(bootstrap) ? bootstrap : String(bootstrap).split(',');
  const endpoints = list.map((item) => item.trim()).filter(Boolean);
  if (endpoints.length === 0) throw new Error('no bootstrap address given');
  return endpoints;
}

// The clientId option: a string of at most CLIENT_ID_LENGTH_MAX characters, or none (undefined,
// null or '') for the default "samsa-node-N".
function clientIdOf(clientId) {
  if (clientId === undefined || clientId === null || clientId === '') return `samsa-node-${clientsMade}`;
  if (typeof clientId !== 'string' || clientId.length > CLIENT_ID_LENGTH_MAX) {
    throw new RangeError(`clientId must be a string of at most ${CLIENT_ID_LENGTH_MAX} characters, not ${String(clientId).slice(0, 40)}`);
  }
  return clientId;
}

class SamsaClient {
  // bootstrap: "host:port,host:port" or an array of them (brokers, or controllers).
  // idempotence (default true): produce with acks -1 is idempotent; see produce().
  // deliveryTimeoutMs: how long a produce() call may take in all, retries included (Kafka's
  // delivery.timeout.ms, 120 s); at least one produce attempt's deadline, 2 * timeoutMs.
  // clientId: the name every call gives the servers (samsa-client-id metadata), that client
  // quotas and a group's description know this client by; default "samsa-node-N".
  // 'security.protocol' ('PLAINTEXT' or 'SSL'), 'ssl.ca.location', 'ssl.certificate.location',
  // 'ssl.key.location': TLS, as the Python SDK and librdkafka name it (tls.js); the files are
  // read here, and a wrong setting or file is a TlsConfigError naming it. With 'security.protocol'
  // 'SASL_SSL', also 'sasl.mechanism' (SCRAM-SHA-256 or SCRAM-SHA-512), 'sasl.username' and
  // 'sasl.password' (sasl.js), or OAUTHBEARER and the sasl.oauthbearer.* settings
  // (oauthbearer.js): every call carries a session ticket, from one SASL exchange.
  constructor(bootstrap, options = {}) {
    const { idempotence = true } = options;
    clientsMade += 1;
    const clientId = clientIdOf(options.clientId);
    const timeoutMs = checkMs('timeoutMs', options.timeoutMs ?? 15000);
    const deliveryTimeoutMs = checkMs(
      'deliveryTimeoutMs',
      options.deliveryTimeoutMs ?? Math.max(DELIVERY_TIMEOUT_MS, 2 * timeoutMs),
    );
    if (deliveryTimeoutMs < 2 * timeoutMs) {
      throw new RangeError(`deliveryTimeoutMs (${deliveryTimeoutMs}) must be at least 2 * timeoutMs (${2 * timeoutMs})`);
    }
    this.bootstrap = splitEndpoints(bootstrap);
    this.tls = tlsLocations(options); // the TLS files, or null for PLAINTEXT
    const sasl = saslSettings(options); // null unless SASL_SSL
    const tlsCredentials = channelCredentials(this.tls); // insecure or TLS
    // The login (SASL_SSL): its exchanges go over TLS alone, every other call carries its ticket.
    this.sasl =
      sasl === null
        ? null
        : new SaslLogin((endpoint) => exchange(loadServices().sasl, tlsCredentials, endpoint, sasl));
    this.credentials = tlsCredentials; // every channel's, with the login's ticket when SASL_SSL
    this.bootstrapAnswered = 0; // the index of the bootstrap server that answered last
    this.timeoutMs = timeoutMs;
    this.deliveryTimeoutMs = deliveryTimeoutMs;
    this.clientId = clientId;
    this.identity = new grpc.Metadata(); // sent with every call
    this.identity.set(CLIENT_ID_METADATA_KEY, clientId);
    this.idempotence = idempotence;
    this.stubs = new Map();
    this.metadataOffset = 0; // of our last admin write, so that reads see it
    // The idempotent producer's identity, a Promise of {producerId, producerEpoch, sequences}
    // (sequences: "topic:partition" -> the next base_sequence), made on the first idempotent
    // produce; null until then and after a failure dropped it.
    this.producer = null;
    this.partitionQueues = new Map(); // "topic:partition" -> the tail of its idempotent produces
    this.brokerEndpoints = {}; // broker id -> host:port, from every metadata read
    // "topic:partition" -> {leader, leaderEpoch} a broker named, until the metadata names it.
    this.namedLeaders = new Map();
    this.members = new Set(); // the GroupMembers joined through this client, until they leave
    this.joins = new Set(); // joinGroup's joins under way (each leaves again if close() came)
    this.closing = null; // close()'s Promise, once called
    this.closed = false; // no new channel may be opened
  }

  stub(kind, endpoint) {
    const key = `${kind}@${endpoint}`;
    if (this.closed) throw new Error(`the client is closed: no ${kind} call to ${endpoint}`);
    if (!this.stubs.has(key)) {
      const Service = loadServices()[kind];
      const options = { 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES };
      const credentials =
        this.sasl === null ? this.credentials : saslChannelCredentials(this.credentials, this.sasl, endpoint);
      this.stubs.set(key, new Service(endpoint, credentials, options));
    }
    return this.stubs.get(key);
  }

  // One unary call with a deadline; resolves with the answer message.
  call(kind, endpoint, method, request, timeoutMs = this.timeoutMs) {
    const stub = this.stub(kind, endpoint);
    return new Promise((resolve, reject) => {
      const options = { deadline: Date.now() + timeoutMs };
      stub[method](request, this.identity.clone(), options, (error, answer) => {
        if (error) {
          if (error.code === grpc.status.UNAUTHENTICATED && this.sasl !== null) this.sasl.drop();
          const hint = this.sasl === null ? missingCertificateHint(this.tls, error) : ''; // logs in instead
          error.message = `${method} at ${endpoint}: ${hint}${error.details || error.message}`;
          reject(error);
        } else resolve(answer);
      });
    });
  }

  // Asks the bootstrap servers in turn until one answers at the gRPC level, starting from the
  // one that answered last: a server that hangs (paused, or cut off without a reset) costs a
  // whole deadline, once, rather than at every metadata read.
  async callAny(kind, method, request) {
    let lastError;
    const count = this.bootstrap.length;
    const first = this.bootstrapAnswered;
    for (let step = 0; step < count; step++) {
      const at = (first + step) % count;
      try {
        const answer = await this.call(kind, this.bootstrap[at], method, request);
        this.bootstrapAnswered = at;
        return answer;
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }

  // An admin write: a broker forwards it to the active controller; a controller that is not
  // the active one answers NOT_CONTROLLER, naming the active one when it knows it. A named
  // controller that does not answer (it failed over again) is not asked twice in a row: the
  // next attempt goes back to the bootstrap servers.
  async controllerWrite(method, request) {
    let endpoint = null;
    return withRetries(this.timeoutMs, async () => {
      const named = endpoint;
      endpoint = null;
      const answer = named
        ? await this.call('controller', named, method, request)
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

  // The topic's partitions: [{partition, leader, leaderEpoch, endpoint, topicId}]; leader -1
  // and endpoint null when offline or just created. topicId (hex, KIP-516) goes with Produce
  // and Fetch: a broker still hosting a deleted topic of this name refuses them
  // (UNKNOWN_TOPIC_ID, retried after describing again). Retried while the topic is unknown.
  async describeTopic(name) {
    return withRetries(this.timeoutMs, async () => {
      const { partitions, endpoints, topicId } = await this.readTopicPages(name);
      return partitions.map((p) => {
        const endpoint = (p.leader >= 0 && endpoints[p.leader]) || null;
        const leader = endpoint === null ? -1 : p.leader;
        return { partition: p.partition, leader, leaderEpoch: p.leader_epoch, endpoint, topicId: topicId.toString('hex') };
      });
    });
  }

  // Every partition of one topic, and the brokers' endpoints, from DescribeTopics: an answer
  // carries at most partition_limit partitions (the server's default, 2,000, when unset) and a
  // cursor to go on from, so a larger topic is read page by page. Pages may come from different
  // metadata offsets (each page asks for one at least as current as the page before, as
  // controller.proto says): a topic recreated in between (another topic_id) fails the read with
  // a retriable error, and so does one deleted (the cursor's topic answers UNKNOWN_TOPIC).
  async readTopicPages(name) {
    const partitions = [];
    const endpoints = {};
    let cursor = null;
    let topicId = null;
    let minOffset = this.metadataOffset; // each page at least as current as the one before
    for (;;) {
      const request = {
        names: [name],
        min_metadata_offset: minOffset,
        partition_limit: DESCRIBE_PARTITIONS_MAX,
      };
      if (cursor !== null) request.cursor = cursor;
      const answer = await this.callAny('controller', 'DescribeTopics', request);
      minOffset = Math.max(minOffset, toInt((answer.status && answer.status.metadata_offset) || 0));
      const topic = check(answer.topics[0] || {}, `topic ${name}`);
      if (topicId !== null && !topicId.equals(topic.topic_id)) {
        throw new SamsaError('ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION', `topic ${name} was recreated`);
      }
      topicId = topic.topic_id;
      partitions.push(...topic.partitions);
      Object.assign(endpoints, answer.broker_endpoints);
      Object.assign(this.brokerEndpoints, answer.broker_endpoints);
      const next = answer.next_cursor;
      if (!next || next.topic !== name) return { partitions, endpoints, topicId };
      if (cursor !== null && next.partition <= cursor.partition) {
        throw new Error(`DescribeTopics of ${name} did not move on from partition ${next.partition}`);
      }
      cursor = { topic: name, partition: next.partition };
    }
  }

  // One partition's leader as describeTopic gives it; LEADER_NOT_AVAILABLE (retriable) when it
  // has none. Only this partition's leader matters: the topic's other partitions may be offline.
  // A later leadership a broker named (leaderResult) is taken over the metadata's until the
  // metadata catches up with it: the broker answering metadata may lag (or be cut off from the
  // controllers), and asking the deposed leader again would be answered the same. One named for
  // another topic id (the topic was deleted and created again, its leader epochs starting over)
  // is dropped: its epoch says nothing of the new topic's.
  async leaderOf(topic, partition) {
    const found = (await this.describeTopic(topic)).find((p) => p.partition === partition);
    if (!found) throw new SamsaError('ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION', `${topic}[${partition}]`);
    const key = `${topic}:${partition}`;
    const named = this.namedLeaders.get(key);
    if (named && (named.leaderEpoch <= found.leaderEpoch || named.topicId !== found.topicId)) {
      this.namedLeaders.delete(key);
    } else if (named && this.brokerEndpoints[named.leader]) {
      const endpoint = this.brokerEndpoints[named.leader];
      return { ...found, leader: named.leader, leaderEpoch: named.leaderEpoch, endpoint };
    }
    if (found.endpoint === null) throw new SamsaError('ERROR_CODE_LEADER_NOT_AVAILABLE', `${topic}[${partition}]`);
    return found;
  }

  // The result for one partition of a leader's answer (Produce, Fetch, ListOffsets,
  // DeleteRecords) asked of `leader` (leaderOf's). One refused with NOT_LEADER_OR_FOLLOWER or
  // FENCED_LEADER_EPOCH may name the current leader (KIP-951): kept for leaderOf, with the topic
  // id the call was made under.
  leaderResult(answer, topic, partition, leader) {
    const result = partitionResult(answer, topic, partition);
    const current = result.current_leader;
    if (current && current.leader_id >= 0 && current.leader_epoch >= 0) {
      const known = this.namedLeaders.get(`${topic}:${partition}`);
      if (!known || known.topicId !== leader.topicId || known.leaderEpoch < current.leader_epoch) {
        const named = { leader: current.leader_id, leaderEpoch: current.leader_epoch, topicId: leader.topicId };
        this.namedLeaders.set(`${topic}:${partition}`, named);
      }
    }
    return result;
  }

  // Deletes one partition's records below `offset` (-1: every record up to the high watermark),
  // as Kafka's DeleteRecords (KIP-107). Resolves with the partition's low watermark once the
  // leader and its in-sync followers all start there, so no later leader serves what went.
  async deleteRecords(topic, partition, offset) {
    checkPartition(partition);
    checkOffset(offset, true);
    const request = {
      topics: [{ name: topic, partitions: [{ partition, offset }] }],
      timeout_ms: this.timeoutMs,
    };
    return withRetries(this.timeoutMs, async () => {
      const leader = await this.leaderOf(topic, partition);
      const answer = await this.call('broker', leader.endpoint, 'DeleteRecords', request, 2 * this.timeoutMs);
      const result = check(this.leaderResult(answer, topic, partition, leader), `${topic}[${partition}]`);
      return toInt(result.low_watermark);
    });
  }

  // Reads one partition from `offset`, waiting up to maxWaitMs for data. Resolves with
  // {records, nextFetchOffset, highWatermark, topicId}; records are at or after `offset`, of
  // the topic whose id is topicId (see Positions, positions.js, for one deleted and re-created). Each attempt
  // names the leader epoch its leader was found at (KIP-320), so that a broker that no longer
  // leads at that epoch, or does not lead yet, refuses (FENCED_LEADER_EPOCH,
  // UNKNOWN_LEADER_EPOCH, retried) instead of answering from a deposed leader's log.
  // CORRUPT_MESSAGE, retriable elsewhere, is thrown at once: the batch stored at `offset` does
  // not decode, and fetching it again fails the same way (errors.proto).
  async fetch(topic, partition, offset, maxWaitMs = 500) {
    checkPartition(partition);
    checkOffset(offset);
    const retried = (error) => isRetried(error) && error.code !== 'ERROR_CODE_CORRUPT_MESSAGE';
    return withRetries(this.timeoutMs, async () => {
      const leader = await this.leaderOf(topic, partition);
      const data = { partition, fetch_offset: offset, partition_max_bytes: 1024 * 1024 };
      data.current_leader_epoch = leader.leaderEpoch;
      const request = {
        max_wait_ms: maxWaitMs,
        min_bytes: 1,
        max_bytes: 16 * 1024 * 1024,
        decode_records: true,
        topics: [{ name: topic, topic_id: Buffer.from(leader.topicId, 'hex'), partitions: [data] }],
      };
      const answer = await this.call('broker', leader.endpoint, 'Fetch', request, maxWaitMs + this.timeoutMs);
      check(answer, 'Fetch');
      const result = check(this.leaderResult(answer, topic, partition, leader), `${topic}[${partition}]`);
      return {
        records: result.decoded_records.map(fromTypedRecord),
        nextFetchOffset: toInt(result.next_fetch_offset),
        highWatermark: toInt(result.high_watermark),
        topicId: leader.topicId, // the topic fetched (hex): Positions tells a re-created one
      };
    }, retried);
  }

  // One partition's offset as ListOffsets finds it: 'earliest' is the log start (the first
  // offset still stored, where auto.offset.reset=earliest starts), 'latest' the high watermark.
  // A leader just elected answers OFFSET_NOT_AVAILABLE until its high watermark is its own
  // (retried); the leader epoch is checked as in fetch(), and the topic id as there (KIP-516:
  // UNKNOWN_TOPIC_ID, retried after describing the topic again).
  async listOffset(topic, partition, spec) {
    checkPartition(partition);
    const specs = { earliest: 'OFFSET_SPEC_EARLIEST', latest: 'OFFSET_SPEC_LATEST' };
    if (!specs[spec]) throw new Error(`listOffset takes 'earliest' or 'latest', not ${spec}`);
    return withRetries(this.timeoutMs, async () => {
      const leader = await this.leaderOf(topic, partition);
      const data = { partition, offset_spec: specs[spec], current_leader_epoch: leader.leaderEpoch };
      const topicId = Buffer.from(leader.topicId, 'hex');
      const request = { topics: [{ name: topic, topic_id: topicId, partitions: [data] }] };
      const answer = await this.call('broker', leader.endpoint, 'ListOffsets', request);
      return toInt(check(this.leaderResult(answer, topic, partition, leader), `${topic}[${partition}]`).offset);
    });
  }

  // Ends the client: joins under way finish and leave again, each group member that has not
  // left stops heartbeating and leaves (as Kafka's consumer.close() does, so its partitions are
  // reassigned at once rather than after its session times out), then every channel is closed
  // and none is opened again, so nothing keeps Node running. Resolves once that is done; calling it again returns the same Promise.
  close() {
    if (this.closing === null) {
      const joins = [...this.joins].map((joining) => joining.catch(() => {}));
      const leaving = () => Promise.all([...this.members].map((member) => member.leave().catch(() => {})));
      this.closing = Promise.all(joins).then(leaving).then(() => {
        this.closed = true;
        for (const stub of this.stubs.values()) stub.close();
        this.stubs.clear();
      });
    }
    return this.closing;
  }
}

Object.assign(SamsaClient.prototype, producerMethods, groupMethods);

module.exports = { SamsaClient, GroupMember, Positions, SamsaError, TlsConfigError, NO_ERROR, murmur2, partitionForKey };
