'use strict';
// TLS for the client's channels, with the settings named as the Python SDK (common/tls.py) and
// librdkafka name them, so that one set of properties serves every client:
//   'security.protocol'         PLAINTEXT (the default), SSL or SASL_SSL (TLS, and a user name
//                               and password: sasl.js), case-insensitive; SASL_PLAINTEXT is
//                               refused: Samsa sends SASL over TLS only.
//   'ssl.ca.location'           PEM file of the CA that verifies the servers (else the
//                               system's roots, gRPC's default).
//   'ssl.certificate.location'  this client's certificate chain, PEM, and
//   'ssl.key.location'          its unencrypted private key: set both or neither; a cluster
//                               with ssl.client.auth=required refuses a client without them.
// tlsLocations checks the settings alone (pure); checkPem what a file holds (pure);
// channelCredentials reads the files, once, when the client is made: a mistake is thrown there
// naming the setting and the file, not met later as an opaque handshake failure, and a
// rotated certificate takes a new client. An ssl.* setting with PLAINTEXT is refused rather
// than ignored: the client would talk plaintext to a cluster its user meant to reach over TLS.

const fs = require('node:fs');
const grpc = require('@grpc/grpc-js');

const PROTOCOL = 'security.protocol';
const CA = 'ssl.ca.location';
const CERTIFICATE = 'ssl.certificate.location';
const KEY = 'ssl.key.location';
const LOCATIONS = [CA, CERTIFICATE, KEY];
// A PEM file larger than this is not a certificate chain or a key (common/tls.py PEM_BYTES_MAX):
// refused before it is read whole.
const PEM_BYTES_MAX = 1 << 20;

// A TLS setting or file that cannot work; the message names the setting and the fix.
class TlsConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TlsConfigError';
  }
}

// 'security.protocol' upper-cased (Kafka takes it in any case), or a TlsConfigError.
function protocolOf(value = 'PLAINTEXT') {
  const upper = typeof value === 'string' ? value.trim().toUpperCase() : '';
  if (upper === 'PLAINTEXT' || upper === 'SSL' || upper === 'SASL_SSL') return upper;
  if (upper === 'SASL_PLAINTEXT') {
    throw new TlsConfigError(
      `${PROTOCOL}=${value}: Samsa sends SASL over TLS only (its session ticket is a bearer credential); use SASL_SSL`,
    );
  }
  throw new TlsConfigError(`${PROTOCOL}=${String(value)}: expected PLAINTEXT, SSL or SASL_SSL`);
}

// The files the client options name, {ca, certificate, key} (each a path or null), or null for
// PLAINTEXT (SSL and SASL_SSL both dial with TLS). Nothing is read here.
function tlsLocations(options = {}) {
  const chosen = protocolOf(options[PROTOCOL] ?? 'PLAINTEXT');
  const given = {};
  for (const setting of LOCATIONS) {
    const value = options[setting];
    if (value === undefined || value === null || value === '') continue;
    if (typeof value !== 'string') {
      throw new TlsConfigError(`${setting} must be a file path (a string), not ${typeof value}`);
    }
    given[setting] = value;
  }
  const named = Object.keys(given);
  if (chosen === 'PLAINTEXT') {
    if (named.length > 0) {
      throw new TlsConfigError(
        `${named[0]} is set but ${PROTOCOL} is PLAINTEXT: set ${PROTOCOL}=SSL to connect with TLS`,
      );
    }
    return null;
  }
  if ((given[CERTIFICATE] === undefined) !== (given[KEY] === undefined)) {
    throw new TlsConfigError(`${CERTIFICATE} and ${KEY} go together: set both or neither`);
  }
  return { ca: given[CA] ?? null, certificate: given[CERTIFICATE] ?? null, key: given[KEY] ?? null };
}

// `data`, the contents of the file `setting` names, if it is what the setting needs: a PEM
// certificate, or an unencrypted PEM private key.
function checkPem(setting, location, data, isKey = false) {
  const text = data.toString('latin1');
  if (!text.includes('-----BEGIN ')) {
    throw new TlsConfigError(`${setting}=${location}: not a PEM file (no -----BEGIN line)`);
  }
  if (isKey && text.includes('ENCRYPTED')) {
    throw new TlsConfigError(
      `${setting}=${location}: the key is encrypted; gRPC needs an unencrypted PEM key (openssl pkey -in KEY -out KEY.plain), kept readable by this user only`,
    );
  }
  if (isKey && !text.includes('PRIVATE KEY-----')) {
    throw new TlsConfigError(`${setting}=${location}: no PRIVATE KEY block in it`);
  }
  if (!isKey && !text.includes('-----BEGIN CERTIFICATE-----')) {
    throw new TlsConfigError(`${setting}=${location}: no CERTIFICATE block in it`);
  }
  return data;
}

// The file `setting` names, read and checked (a TlsConfigError naming both when it cannot do).
function readPem(setting, location, isKey = false) {
  let data;
  try {
    const size = fs.statSync(location).size;
    if (size > PEM_BYTES_MAX) throw new TlsConfigError(`${setting}=${location}: ${size} bytes, not a PEM file`);
    data = fs.readFileSync(location);
  } catch (error) {
    if (error instanceof TlsConfigError) throw error;
    // "ENOENT: no such file or directory, open '...'": the path is in the message already.
    throw new TlsConfigError(`${setting}=${location}: cannot read it (${String(error.message).split(',')[0]})`);
  }
  return checkPem(setting, location, data, isKey);
}

// The credentials every channel of a client dials with: insecure for PLAINTEXT, else TLS that
// verifies the servers with ssl.ca.location and presents the client's certificate if it has one.
// `files`: tlsLocations(options), what the client was given.
function channelCredentials(files) {
  if (files === null) return grpc.credentials.createInsecure();
  const ca = files.ca === null ? null : readPem(CA, files.ca);
  const certificate = files.certificate === null ? null : readPem(CERTIFICATE, files.certificate);
  const key = files.key === null ? null : readPem(KEY, files.key, true);
  return grpc.credentials.createSsl(ca, key, certificate);
}

// What to say before a call's error when it may be a cluster refusing a client without a
// certificate (ssl.client.auth=required): gRPC reports only that no connection was established
// (a server with BoringSSL closes the handshake without naming the reason), so this client names
// the likely one. '' when the client has a certificate, talks plaintext, or nothing listened.
function missingCertificateHint(locations, error) {
  if (locations === null || locations.certificate !== null) return '';
  if (error.code !== grpc.status.UNAVAILABLE || /ECONNREFUSED|ENOTFOUND|EAI_AGAIN/.test(String(error.details))) return '';
  return `no connection over TLS, and this client has no certificate: a cluster with ssl.client.auth=required refuses it (set ${CERTIFICATE} and ${KEY}): `;
}

module.exports = { TlsConfigError, channelCredentials, checkPem, missingCertificateHint, protocolOf, tlsLocations };
