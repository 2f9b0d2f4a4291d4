'use strict';
// SASL/SCRAM for the Node client (proto/samsa/v1/security.proto), with the settings named as the
// Python SDK and librdkafka name them:
//   'security.protocol'  SASL_SSL: TLS (the ssl.* settings of tls.js) and a user name and password;
//   'sasl.mechanism'     SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (required with SASL_SSL);
//   'sasl.username', 'sasl.password' (SCRAM), or the sasl.oauthbearer.* settings of
//   oauthbearer.js (OAUTHBEARER: a token from an OIDC provider instead of a password).
// How it works: the first call a client makes runs one SCRAM exchange (RFC 5802) with the
// server it calls, over SaslService.SaslAuthenticate, and gets a session ticket that every
// process of the cluster accepts. Every call carries it as `samsa-sasl-ticket` metadata, added
// by gRPC call credentials (so no call site knows about it). The client authenticates again once
// 80% of the ticket's lifetime has passed (KIP-368's re-authentication), and after a server
// refused the ticket (UNAUTHENTICATED: expired, or the user's credential changed). The password
// never leaves the client: SCRAM proves it knows it, and checks the server knows the credential.
// A wrong password fails the call with gRPC UNAUTHENTICATED, which no retry loop retries.

const crypto = require('node:crypto');
const grpc = require('@grpc/grpc-js');
const { OIDC_KEYS, bearerMessage, fetchToken, oidcSettings } = require('./oauthbearer');

const PROTOCOL = 'security.protocol';
const MECHANISM = 'sasl.mechanism';
const USERNAME = 'sasl.username';
const PASSWORD = 'sasl.password';
const OAUTHBEARER = 'OAUTHBEARER';
const SASL_KEYS = [MECHANISM, USERNAME, PASSWORD, ...Object.values(OIDC_KEYS)];
const HASHES = { 'SCRAM-SHA-256': 'sha256', 'SCRAM-SHA-512': 'sha512' };
// Fewer PBKDF2 iterations than Kafka's minimum: a server asking for them is refused.
const ITERATIONS_MIN = 4096;
const TICKET_METADATA_KEY = 'samsa-sasl-ticket';
const REFRESH_FRACTION = 0.8;
const EXCHANGE_TIMEOUT_MS = 10000;
const NO_ERROR = 'ERROR_CODE_UNSPECIFIED';

// A SASL setting that cannot work; the message names the setting and the fix.
class SaslConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SaslConfigError';
  }
}

// The exchange failed (a wrong password, an unknown user, a server that could not prove the
// credential): `code` is gRPC's UNAUTHENTICATED, so that retry loops give up at once.
class SaslAuthenticationError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SaslAuthenticationError';
    this.code = grpc.status.UNAUTHENTICATED;
    this.details = message;
  }
}

// {mechanism, username, password} (SCRAM) or {mechanism, oidc} (OAUTHBEARER) for SASL_SSL, else
// null; a SaslConfigError for a sasl.* setting without SASL_SSL, or one missing or wrong with
// it. Pure.
function saslSettings(options = {}) {
  const protocol = String(options[PROTOCOL] ?? 'PLAINTEXT').trim().toUpperCase();
  const given = SASL_KEYS.filter((key) => options[key] !== undefined && options[key] !== null && options[key] !== '');
  if (protocol !== 'SASL_SSL') {
    if (given.length > 0) {
      throw new SaslConfigError(`${given[0]} is set but ${PROTOCOL} is ${protocol}: set ${PROTOCOL}=SASL_SSL to authenticate with it`);
    }
    return null;
  }
  const mechanism = String(options[MECHANISM] ?? '').trim().toUpperCase();
  if (mechanism === OAUTHBEARER) {
    const scramKey = [USERNAME, PASSWORD].find((key) => given.includes(key));
    if (scramKey !== undefined) {
      throw new SaslConfigError(`${scramKey} does not apply to ${MECHANISM}=${OAUTHBEARER}: its login is a token from sasl.oauthbearer.token.endpoint.url`);
    }
    return { mechanism, oidc: oidcSettings(options, (message) => new SaslConfigError(message)) };
  }
  if (!(mechanism in HASHES)) {
    throw new SaslConfigError(`${MECHANISM}=${options[MECHANISM] ?? ''}: expected one of ${[...Object.keys(HASHES), OAUTHBEARER].join(', ')}`);
  }
  const oauthKey = given.find((key) => Object.values(OIDC_KEYS).includes(key));
  if (oauthKey !== undefined) {
    throw new SaslConfigError(`${oauthKey} applies only to ${MECHANISM}=${OAUTHBEARER}`);
  }
  for (const key of [USERNAME, PASSWORD]) {
    if (typeof options[key] !== 'string' || options[key] === '') {
      throw new SaslConfigError(`${PROTOCOL}=SASL_SSL needs ${key}, a non-empty string`);
    }
  }
  return { mechanism, username: options[USERNAME], password: options[PASSWORD] };
}

function hmac(hash, key, message) {
  return crypto.createHmac(hash, key).update(message).digest();
}

function xor(left, right) {
  return Buffer.from(left.map((byte, index) => byte ^ right[index]));
}

// `text`'s comma-separated attributes, whose keys must be `keys` in order.
function attributes(text, keys, what) {
  const parts = text.split(',');
  if (parts.length !== keys.length || parts.some((part, i) => !part.startsWith(`${keys[i]}=`))) {
    throw new SaslAuthenticationError(`${what} ${JSON.stringify(text)}: expected the attributes ${keys.join(',')}`);
  }
  return parts.map((part) => part.slice(2));
}

// The client's side of one SCRAM exchange (as common/scram.py's ScramClient).
class ScramClient {
  constructor(mechanism, username, password, nonce = crypto.randomBytes(18).toString('base64url')) {
    this.hash = HASHES[mechanism];
    this.password = password;
    this.nonce = nonce;
    this.firstBare = `n=${username.replace(/=/g, '=3D').replace(/,/g, '=2C')},r=${nonce}`;
    this.authMessage = null;
    this.salted = null;
  }

  clientFirst() {
    return Buffer.from(`n,,${this.firstBare}`, 'utf8');
  }

  clientFinal(serverFirst) {
    const text = serverFirst.toString('utf8');
    const [nonce, salt, iterations] = attributes(text, ['r', 's', 'i'], 'server-first message');
    if (!nonce.startsWith(this.nonce) || nonce.length === this.nonce.length) {
      throw new SaslAuthenticationError("the server's nonce does not extend the client's");
    }
    if (!/^\d+$/.test(iterations) || Number(iterations) < ITERATIONS_MIN) {
      throw new SaslAuthenticationError(`the server asks for ${iterations} iterations`);
    }
    const saltBytes = Buffer.from(salt, 'base64');
    const length = crypto.createHash(this.hash).digest().length;
    this.salted = crypto.pbkdf2Sync(Buffer.from(this.password, 'utf8'), saltBytes, Number(iterations), length, this.hash);
    const withoutProof = `c=biws,r=${nonce}`;
    this.authMessage = Buffer.from(`${this.firstBare},${text},${withoutProof}`, 'utf8');
    const clientKey = hmac(this.hash, this.salted, 'Client Key');
    const storedKey = crypto.createHash(this.hash).update(clientKey).digest();
    const proof = xor(clientKey, hmac(this.hash, storedKey, this.authMessage));
    return Buffer.from(`${withoutProof},p=${proof.toString('base64')}`, 'utf8');
  }

  checkServerFinal(serverFinal) {
    const text = serverFinal.toString('utf8');
    if (this.authMessage === null) throw new SaslAuthenticationError('server-final before client-final');
    const [signature] = attributes(text, ['v'], 'server-final message');
    const expected = hmac(this.hash, hmac(this.hash, this.salted, 'Server Key'), this.authMessage);
    const given = Buffer.from(signature, 'base64');
    if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
      throw new SaslAuthenticationError("the server's signature is wrong: it does not hold the credential");
    }
  }
}

// One exchange over SaslAuthenticate at `endpoint`: resolves {ticket, lifetimeMs}; rejects with a
// SaslAuthenticationError for a refusal, or the gRPC error of a call that got no answer.
function exchange(SaslService, credentials, endpoint, settings) {
  if (settings.mechanism === OAUTHBEARER) return bearerExchange(SaslService, credentials, endpoint, settings);
  const scram = new ScramClient(settings.mechanism, settings.username, settings.password);
  const stub = new SaslService(endpoint, credentials);
  return new Promise((resolve, reject) => {
    const call = stub.SaslAuthenticate({ deadline: Date.now() + EXCHANGE_TIMEOUT_MS });
    let answers = 0;
    const fail = (error) => {
      call.cancel();
      stub.close();
      reject(error);
    };
    call.on('data', (answer) => {
      try {
        if (answer.error_code && answer.error_code !== NO_ERROR) {
          throw new SaslAuthenticationError(`SASL authentication of ${settings.username} failed: ${answer.error_code}: ${answer.error_message}`);
        }
        answers += 1;
        if (answers === 1) {
          call.write({ auth_bytes: scram.clientFinal(answer.auth_bytes) });
          return;
        }
        scram.checkServerFinal(answer.auth_bytes);
        call.end();
        stub.close();
        resolve({ ticket: answer.session_ticket, lifetimeMs: Number(answer.session_lifetime_ms) });
      } catch (error) {
        fail(error);
      }
    });
    call.on('error', (error) => reject(error));
    call.write({ mechanism: settings.mechanism, auth_bytes: scram.clientFirst() });
  });
}

// OAUTHBEARER: a fresh token from the OIDC provider, sent in one message (RFC 7628), answered
// with the ticket (or a refusal).
async function bearerExchange(SaslService, credentials, endpoint, settings) {
  const refused = (message) => new SaslAuthenticationError(`SASL/OAUTHBEARER login failed: ${message}`);
  const token = await fetchToken(settings.oidc, refused);
  const stub = new SaslService(endpoint, credentials);
  try {
    return await new Promise((resolve, reject) => {
      const call = stub.SaslAuthenticate({ deadline: Date.now() + EXCHANGE_TIMEOUT_MS });
      call.on('data', (answer) => {
        if (answer.error_code && answer.error_code !== NO_ERROR) {
          reject(refused(`${answer.error_code}: ${answer.error_message}`));
        } else if (!answer.session_ticket) {
          reject(refused('the server answered no session ticket'));
        } else {
          resolve({ ticket: answer.session_ticket, lifetimeMs: Number(answer.session_lifetime_ms) });
        }
        call.cancel();
      });
      call.on('error', (error) => reject(error));
      call.on('end', () => reject(refused('the server ended the exchange without an answer')));
      call.write({ mechanism: OAUTHBEARER, auth_bytes: bearerMessage(token) });
      call.end();
    });
  } finally {
    stub.close();
  }
}

// A client's login: the ticket it has, and the one exchange under way (others wait for it).
class SaslLogin {
  // authenticate(endpoint): a Promise of {ticket, lifetimeMs}.
  constructor(authenticate, now = Date.now) {
    this.authenticate = authenticate;
    this.now = now;
    this.ticket = null;
    this.refreshAt = 0;
    this.pending = null;
  }

  // A Promise of a ticket good for now, authenticating at `endpoint` when there is none.
  current(endpoint) {
    if (this.ticket !== null && this.now() < this.refreshAt) return Promise.resolve(this.ticket);
    if (this.pending === null) {
      const started = this.now();
      this.pending = this.authenticate(endpoint).then(
        ({ ticket, lifetimeMs }) => {
          this.ticket = ticket;
          this.refreshAt = started + REFRESH_FRACTION * lifetimeMs;
          this.pending = null;
          return ticket;
        },
        (error) => {
          this.pending = null;
          throw error;
        },
      );
    }
    return this.pending;
  }

  // A server refused the ticket: the next call authenticates again.
  drop() {
    this.ticket = null;
  }
}

// The credentials of a SASL_SSL client's channel to `endpoint`: TLS, and the ticket on every
// call, from an exchange with `endpoint` when the login has none (grpc-js's service_url leaves
// the port out, so the channel names its server itself).
function saslChannelCredentials(tlsCredentials, login, endpoint) {
  const perCall = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
    login.current(endpoint).then(
      (ticket) => {
        const metadata = new grpc.Metadata();
        metadata.set(TICKET_METADATA_KEY, ticket);
        callback(null, metadata);
      },
      (error) => {
        const failure = error instanceof SaslAuthenticationError ? error : Object.assign(new Error(error.details || error.message), { code: error.code });
        callback(failure);
      },
    );
  });
  return grpc.credentials.combineChannelCredentials(tlsCredentials, perCall);
}

module.exports = {
  SaslAuthenticationError,
  SaslConfigError,
  SaslLogin,
  ScramClient,
  TICKET_METADATA_KEY,
  exchange,
  saslChannelCredentials,
  saslSettings,
};
