#!/usr/bin/env node
'use strict';
// A command-line example of the Node.js client:
//   node example.js --bootstrap HOST:PORT[,HOST:PORT] <command> ...
//   create-topic TOPIC [--partitions N] [--replication-factor N]
//   describe TOPIC                        the partitions, their leaders and the brokers
//   produce TOPIC [--partition P] [--header K=V]... [--acks A] [--no-idempotence]
//                                         one record per stdin line, "key:value" (no ":" is a
//                                         null key), to partition P, or without --partition to
//                                         the partition each key chooses (Kafka's murmur2, as
//                                         the Python SDK; keyless lines share one partition);
//                                         prints {"partition", "base_offset", "count"} per
//                                         partition written. With acks -1 (the default) it is
//                                         idempotent unless --no-idempotence is given
//   delete-records TOPIC --offset N|latest [--partition P]
//                                         deletes the records below N (latest: below the high
//                                         watermark) of partition P (default 0); prints
//                                         {"topic", "partition", "low_watermark"}
//   consume TOPIC [--partition P] [--from OFFSET] [--count N] [--timeout-ms MS]
//                                         reads from OFFSET, or without it from the log start
//   group-consume GROUP TOPIC [--count N] [--timeout-ms MS]
//                                         joins GROUP, reads what it is assigned (as it is
//                                         assigned, handed over later too) from the
//                                         committed offset (or the log start when there is none
//                                         or it was deleted; a topic deleted and created
//                                         again meanwhile: from its start), commits what it
//                                         printed (of a partition handed to another member:
//                                         before it goes), leaves
// TLS: --security-protocol SSL [--ssl-ca-location CA.pem] [--ssl-certificate-location CERT.pem
// --ssl-key-location KEY.pem] (or $SAMSA_SECURITY_PROTOCOL, $SAMSA_SSL_CA_LOCATION, ...), the
// client's security.protocol and ssl.* settings (tls.js). SASL: --security-protocol SASL_SSL
// --sasl-mechanism SCRAM-SHA-256 --sasl-username NAME, and the password in $SAMSA_SASL_PASSWORD
// (or --sasl-password, which other users of the machine can read in the process list) (sasl.js);
// or --sasl-mechanism OAUTHBEARER --sasl-oauthbearer-token-endpoint-url URL
// --sasl-oauthbearer-client-id ID [--sasl-oauthbearer-scope S], and the secret in
// $SAMSA_SASL_OAUTHBEARER_CLIENT_SECRET (or --sasl-oauthbearer-client-secret) (oauthbearer.js).
// consume and group-consume print one JSON object per record. Without --count they stop once
// nothing new came for --timeout-ms; with it, not reaching N in time is an error. Errors are one
// line on stderr and exit code 1.

const readline = require('node:readline');
const { setTimeout: sleep } = require('node:timers/promises');
const { parseArgs } = require('node:util');
const { OIDC_KEYS } = require('./oauthbearer');
const { Positions, SamsaClient } = require('./samsa');

const OPTIONS = {
  bootstrap: { type: 'string', default: process.env.SAMSA_BOOTSTRAP },
  partitions: { type: 'string', default: '1' },
  'replication-factor': { type: 'string', default: '1' },
  partition: { type: 'string' },
  header: { type: 'string', multiple: true, default: [] },
  acks: { type: 'string', default: '-1' },
  'no-idempotence': { type: 'boolean', default: false },
  from: { type: 'string' },
  count: { type: 'string' },
  'timeout-ms': { type: 'string', default: '10000' },
  offset: { type: 'string' },
};
// The client's TLS settings (tls.js), each a flag named like it (--ssl-ca-location) whose
// default is the SAMSA_* variable the services read it from (SAMSA_SSL_CA_LOCATION).
const TLS_SETTINGS = ['security.protocol', 'ssl.ca.location', 'ssl.certificate.location', 'ssl.key.location'];
TLS_SETTINGS.push('sasl.mechanism', 'sasl.username', 'sasl.password', ...Object.values(OIDC_KEYS));
for (const setting of TLS_SETTINGS) {
  OPTIONS[setting.replaceAll('.', '-')] = { type: 'string', default: process.env[`SAMSA_${setting.replaceAll('.', '_').toUpperCase()}`] };
}

// A whole number from a flag, or an error naming the flag.
function intFlag(values, name) {
  const text = values[name];
  if (text === undefined) return undefined;
  if (!/^-?\d+$/.test(text)) throw new Error(`--${name} must be a whole number, not ${JSON.stringify(text)}`);
  return Number(text);
}

function needArgs(positionals, names) {
  if (positionals.length !== names.length) {
    throw new Error(`${positionals[0] || 'a command'} takes ${names.slice(1).join(' ')}`);
  }
}

function printRecord(topic, partition, record) {
  const text = (bytes) => (bytes === null ? null : bytes.toString('utf8'));
  const headers = record.headers.map(([key, value]) => [key, text(value)]);
  const line = { topic, partition, offset: record.offset, timestamp: record.timestamp };
  Object.assign(line, { key: text(record.key), value: text(record.value), headers });
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function readStdinLines() {
  const lines = [];
  for await (const line of readline.createInterface({ input: process.stdin })) lines.push(line);
  return lines;
}

async function produce(client, topic, values) {
  const headers = values.header.map((h) => {
    const at = h.indexOf('=');
    if (at < 0) throw new Error(`--header takes KEY=VALUE, not ${JSON.stringify(h)}`);
    return [h.slice(0, at), h.slice(at + 1)];
  });
  const records = (await readStdinLines()).map((line) => {
    const at = line.indexOf(':');
    const key = at < 0 ? null : line.slice(0, at);
    return { key, value: at < 0 ? line : line.slice(at + 1), headers };
  });
  if (records.length === 0) throw new Error('nothing to produce: stdin had no lines');
  const acks = intFlag(values, 'acks');
  const partition = intFlag(values, 'partition');
  const written =
    partition === undefined
      ? await client.produceByKey(topic, records, acks)
      : [{ partition, baseOffset: await client.produce(topic, partition, records, acks), count: records.length }];
  for (const w of written) {
    console.log(JSON.stringify({ topic, partition: w.partition, base_offset: w.baseOffset, count: w.count }));
  }
}

// Reads `positions` (a Positions of `topic`'s partitions) round-robin until `count` records
// were printed or nothing new came for timeoutMs. Keeps each position at the offset after the
// last printed record of its partition, which is what a group commits; a topic deleted and
// created again meanwhile is read from its start (Positions, auto.offset.reset=earliest).
async function readPartitions(topic, positions, count, timeoutMs, onIdle = () => {}) {
  let printed = 0;
  let lastNews = Date.now();
  while (count === undefined || printed < count) {
    if (Date.now() - lastNews > timeoutMs) break;
    for (const partition of positions.partitionsOf(topic)) {
      if (!positions.has(topic, partition)) continue; // given up by an earlier read's wait
      const answer = await positions.read(topic, partition, 200);
      if (!positions.has(topic, partition)) continue; // given up while it was read: not ours to print
      for (const record of answer.records) {
        if (count !== undefined && printed >= count) break;
        printRecord(topic, partition, record);
        positions.set(topic, partition, record.offset + 1);
        printed += 1;
        lastNews = Date.now();
      }
      // Skip past batches with nothing visible (offsets may have gaps).
      if (answer.records.length === 0) positions.set(topic, partition, answer.nextFetchOffset);
      if (count !== undefined && printed >= count) break;
    }
    // Nothing to read (every partition given up): wait as a fetch would, rather than spin and
    // starve the timers, the group member's heartbeat among them.
    if (positions.partitionsOf(topic).length === 0) await sleep(200);
    await onIdle();
  }
  if (count !== undefined && printed < count) {
    throw new Error(`got ${printed} of ${count} records: nothing new for ${timeoutMs} ms`);
  }
  return printed;
}

async function consume(client, topic, values) {
  const only = intFlag(values, 'partition');
  const partitions = (await client.describeTopic(topic))
    .map((p) => p.partition)
    .filter((p) => only === undefined || p === only);
  if (partitions.length === 0) throw new Error(`${topic} has no partition ${only}`);
  const from = intFlag(values, 'from');
  // An offset asked for that is out of range is an error; the log start, when it moves on (a
  // delete-records meanwhile), is looked up again.
  const positions = new Positions(client, { autoOffsetReset: from === undefined ? 'earliest' : 'none' });
  for (const p of partitions) {
    positions.set(topic, p, from === undefined ? await client.listOffset(topic, p, 'earliest') : from);
  }
  await readPartitions(topic, positions, intFlag(values, 'count'), intFlag(values, 'timeout-ms'));
}

async function groupConsume(client, group, topic, values) {
  const positions = new Positions(client); // the offset after the last record printed
  const start = new Map(); // partition -> where its reading started (nothing to commit there)
  const leaving = new Set(); // partitions whose onRevoke runs: still owned, not to be read again
  // Before a partition goes to another member (or the member leaves): commit what was printed
  // of it and read it no more, so that its next owner starts right after.
  const onRevoke = async (revoked) => {
    const mine = revoked.filter((tp) => tp.topic === topic).map((tp) => tp.partition);
    for (const p of mine) leaving.add(p);
    try {
      const held = mine.filter((p) => positions.has(topic, p));
      const moved = held.filter((p) => positions.get(topic, p) !== start.get(p));
      const offsets = moved.map((partition) => ({ topic, partition, offset: positions.get(topic, partition) }));
      for (const p of held) positions.delete(topic, p);
      if (offsets.length > 0) await member.commit(offsets);
    } finally {
      for (const p of mine) leaving.delete(p);
    }
  };
  const member = await client.joinGroup(group, [topic], { onRevoke });
  const owns = (p) => member.assignment.some((tp) => tp.topic === topic && tp.partition === p);
  const unread = (p) => owns(p) && !positions.has(topic, p) && !leaving.has(p);
  // Reads the partitions assigned and not read yet, the first ones and those handed over later
  // (by a member that left or had too many): from the committed offset, or with Kafka's
  // auto.offset.reset=earliest from the log start when nothing was committed (-1) or the
  // committed offset was deleted since. A partition given up meanwhile is not read.
  const readAssigned = async () => {
    const assigned = member.assignment.filter((tp) => tp.topic === topic && unread(tp.partition));
    if (assigned.length === 0) return;
    const committed = await client.committedOffsets(group, assigned);
    for (const { partition } of assigned) {
      const logStart = await client.listOffset(topic, partition, 'earliest');
      if (!unread(partition)) continue;
      positions.set(topic, partition, Math.max(committed.get(`${topic}:${partition}`), logStart));
      start.set(partition, positions.get(topic, partition));
    }
  };
  let failure = null;
  try {
    await member.waitForAssignment(intFlag(values, 'timeout-ms'));
    await readAssigned();
    try {
      await readPartitions(topic, positions, intFlag(values, 'count'), intFlag(values, 'timeout-ms'), async () => {
        if (member.error) throw member.error;
        // A partition the coordinator took away is another member's now: stop reading it.
        for (const p of positions.partitionsOf(topic)) if (!owns(p)) positions.delete(topic, p);
        await readAssigned();
      });
    } catch (error) {
      failure = error;
    }
    // Commit what was printed and is still ours, even when the count was not reached (leaving
    // calls onRevoke with the same partitions: nothing is left to commit then).
    const moved = positions.entries().filter((p) => p.offset !== start.get(p.partition) && owns(p.partition));
    if (moved.length > 0) await member.commit(moved);
    for (const { partition, offset } of moved) start.set(partition, offset);
  } finally {
    await member.leave();
  }
  if (failure) throw failure;
}

async function main() {
  const { values, positionals } = parseArgs({ options: OPTIONS, allowPositionals: true });
  if (!values.bootstrap) throw new Error('--bootstrap HOST:PORT[,HOST:PORT] is required (or $SAMSA_BOOTSTRAP)');
  const options = { idempotence: !values['no-idempotence'] };
  for (const setting of TLS_SETTINGS) options[setting] = values[setting.replaceAll('.', '-')];
  const client = new SamsaClient(values.bootstrap, options);
  try {
    const [command, ...args] = positionals;
    if (command === 'create-topic') {
      needArgs(positionals, ['create-topic', 'TOPIC']);
      const partitions = intFlag(values, 'partitions');
      const created = await client.createTopic(args[0], partitions, intFlag(values, 'replication-factor'));
      console.log(JSON.stringify({ topic: args[0], created }));
    } else if (command === 'describe') {
      needArgs(positionals, ['describe', 'TOPIC']);
      const cluster = await client.describeCluster();
      const partitions = await client.describeTopic(args[0]);
      console.log(JSON.stringify({ topic: args[0], partitions, brokers: cluster.brokers }));
    } else if (command === 'produce') {
      needArgs(positionals, ['produce', 'TOPIC']);
      await produce(client, args[0], values);
    } else if (command === 'delete-records') {
      needArgs(positionals, ['delete-records', 'TOPIC']);
      if (values.offset === undefined) throw new Error('delete-records needs --offset N or --offset latest');
      const offset = values.offset === 'latest' ? -1 : intFlag(values, 'offset');
      const partition = intFlag(values, 'partition') ?? 0;
      const lowWatermark = await client.deleteRecords(args[0], partition, offset);
      console.log(JSON.stringify({ topic: args[0], partition, low_watermark: lowWatermark }));
    } else if (command === 'consume') {
      needArgs(positionals, ['consume', 'TOPIC']);
      await consume(client, args[0], values);
    } else if (command === 'group-consume') {
      needArgs(positionals, ['group-consume', 'GROUP', 'TOPIC']);
      await groupConsume(client, args[0], args[1], values);
    } else {
      throw new Error(`unknown command ${JSON.stringify(command || '')}: use create-topic, describe, produce, delete-records, consume or group-consume`);
    }
  } finally {
    await client.close();
  }
}

main().catch((error) => {
  process.stderr.write(`error: ${String(error.message || error).split('\n')[0]}\n`);
  process.exit(1);
});
