'use strict';
// SASL/OAUTHBEARER for the Node client (KIP-255, KIP-768), as the Python SDK
// (samsa_client/oidc_token.py) and librdkafka do it: with 'sasl.mechanism' OAUTHBEARER and
// 'sasl.oauthbearer.method' oidc, each login asks the identity provider's token endpoint for a
// token by the OAuth 2.0 client_credentials grant (RFC 6749 section 4.4) and sends it to the
// cluster in one RFC 7628 message; the cluster checks the token against its JWKS and answers with
// the same session ticket a SCRAM login earns, never valid past the token's exp. The settings:
//   'sasl.oauthbearer.token.endpoint.url'  http(s) URL of the token endpoint (required);
//   'sasl.oauthbearer.client.id', 'sasl.oauthbearer.client.secret'  the client's (required);
//   'sasl.oauthbearer.scope'               optional.
// No token is cached: the client logs in again at 80% of its session (sasl.js), with a new one.
// A refusal (a wrong secret, an unknown client) fails the login as a wrong password does; an
// endpoint that cannot be reached fails it with gRPC UNAVAILABLE, which retry loops retry.

const grpc = require('@grpc/grpc-js');

const OIDC_KEYS = {
  method: 'sasl.oauthbearer.method',
  url: 'sasl.oauthbearer.token.endpoint.url',
  clientId: 'sasl.oauthbearer.client.id',
  clientSecret: 'sasl.oauthbearer.client.secret',
  scope: 'sasl.oauthbearer.scope',
};
// An answer larger than this is not a token endpoint's (the Python SDK's bound too).
const TOKEN_RESPONSE_BYTES_MAX = 64 * 1024;
const TOKEN_TIMEOUT_MS = 10000;

// {url, clientId, clientSecret, scope} from the settings; `configError(message)` makes the error
// thrown for a missing or wrong one. Pure.
function oidcSettings(options, configError) {
  const method = String(options[OIDC_KEYS.method] ?? 'oidc').trim().toLowerCase();
  if (method !== 'oidc') {
    throw configError(`${OIDC_KEYS.method}=${options[OIDC_KEYS.method]}: only oidc (a client_credentials token endpoint) is supported`);
  }
  for (const key of [OIDC_KEYS.url, OIDC_KEYS.clientId, OIDC_KEYS.clientSecret]) {
    if (typeof options[key] !== 'string' || options[key] === '') {
      throw configError(`sasl.mechanism=OAUTHBEARER needs ${key}, a non-empty string`);
    }
  }
  let url;
  try {
    url = new URL(options[OIDC_KEYS.url]);
  } catch {
    throw configError(`${OIDC_KEYS.url}=${options[OIDC_KEYS.url]} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw configError(`${OIDC_KEYS.url} must be an http:// or https:// URL, not ${url.protocol}`);
  }
  const scope = options[OIDC_KEYS.scope];
  return {
    url: url.href,
    clientId: options[OIDC_KEYS.clientId],
    clientSecret: options[OIDC_KEYS.clientSecret],
    scope: typeof scope === 'string' && scope !== '' ? scope : null,
  };
}

// The token request: HTTP Basic over the form-urlencoded id and secret (RFC 6749 2.3.1), and the
// form. Pure.
function tokenRequest(oidc) {
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (oidc.scope !== null) form.set('scope', oidc.scope);
  const encode = (text) => new URLSearchParams({ x: text }).toString().slice(2); // as quote_plus
  const basic = Buffer.from(`${encode(oidc.clientId)}:${encode(oidc.clientSecret)}`, 'utf8').toString('base64');
  return {
    url: oidc.url,
    headers: {
      Authorization: `Basic ${basic}`,
      'Content-Type': 'application/x-www-form-urlencoded',
      Accept: 'application/json',
    },
    body: form.toString(),
  };
}

// The access token of the endpoint's answer (RFC 6749 5.1); `refused(message)` makes the error
// thrown for an error answer (5.2) or one that holds no Bearer token. Pure.
function accessToken(text, refused) {
  let answer;
  try {
    answer = JSON.parse(text);
  } catch {
    throw refused("the token endpoint's answer is not JSON");
  }
  if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) {
    throw refused("the token endpoint's answer is not a JSON object");
  }
  if ('error' in answer) {
    const detail = answer.error_description ? `: ${String(answer.error_description).slice(0, 200)}` : '';
    throw refused(`the token endpoint refused: ${String(answer.error).slice(0, 64)}${detail}`);
  }
  if (typeof answer.access_token !== 'string' || answer.access_token === '') {
    throw refused("the token endpoint's answer has no access_token");
  }
  const type = answer.token_type ?? 'Bearer';
  if (typeof type !== 'string' || type.toLowerCase() !== 'bearer') {
    throw refused(`the token endpoint issued a ${JSON.stringify(String(type).slice(0, 32))} token, not Bearer`);
  }
  return answer.access_token;
}

// The body of `response`, refused once it passes TOKEN_RESPONSE_BYTES_MAX (read no further).
async function boundedText(response, refused) {
  const chunks = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.length;
    if (size > TOKEN_RESPONSE_BYTES_MAX) throw refused(`the token endpoint answered more than ${TOKEN_RESPONSE_BYTES_MAX} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}

// A token from the endpoint (one POST); rejects with refused(message) when it refuses, and with
// an UNAVAILABLE error when it cannot be reached.
async function fetchToken(oidc, refused) {
  const request = tokenRequest(oidc);
  let response;
  try {
    response = await fetch(request.url, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
      redirect: 'error',
      signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
    });
  } catch (error) {
    const message = `the token endpoint ${request.url} could not be reached: ${error.cause?.message ?? error.message}`;
    throw Object.assign(new Error(message), { code: grpc.status.UNAVAILABLE, details: message });
  }
  return accessToken(await boundedText(response, refused), refused);
}

// RFC 7628's initial client response: no channel binding, no authorization identity.
function bearerMessage(token) {
  return Buffer.from(`n,,\x01auth=Bearer ${token}\x01\x01`, 'utf8');
}

module.exports = { OIDC_KEYS, accessToken, bearerMessage, fetchToken, oidcSettings, tokenRequest };
