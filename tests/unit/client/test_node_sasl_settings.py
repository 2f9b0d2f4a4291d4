"""Goal: the Node client's SASL settings and SCRAM side (clients/node/sasl.js) take the Python
SDK's and librdkafka's names, refuse a mistake when the client is made, naming the setting,
write RFC 7677's messages, refuse a server that cannot prove the credential, and authenticate
once for many calls: a ticket is reused until 80% of its lifetime has passed, concurrent calls
share one exchange, a failed exchange is not remembered as a ticket, and a refused ticket is
dropped.

Method: clients/node/sasl.js under `node`, no server; the login's exchange and clock are
injected. (tests/integration/test_node_sasl.py runs it against a real cluster.)
"""

from __future__ import annotations

import json

from node_script import needs_node, run_node_script

pytestmark = needs_node

SETTINGS = """
const sasl = require(process.argv[1]);
const data = %s;
console.log(JSON.stringify(data.map((options) => {
  try {
    return { ok: sasl.saslSettings(options) };
  } catch (error) {
    return { error: error.name, message: error.message };
  }
})));
"""


def test_the_settings_are_checked_and_named() -> None:
    sasl = {"security.protocol": "sasl_ssl", "sasl.username": "alice", "sasl.password": "pw"}
    out = run_node_script(
        SETTINGS
        % json.dumps(
            [
                {},
                {"security.protocol": "SSL"},
                sasl | {"sasl.mechanism": "scram-sha-512"},
                {"security.protocol": "SSL", "sasl.username": "alice"},
                sasl | {"sasl.mechanism": "PLAIN"},
                sasl | {"sasl.mechanism": "SCRAM-SHA-256", "sasl.password": ""},
            ]
        ),
        "sasl.js",
    )
    assert out[:3] == [
        {"ok": None},
        {"ok": None},
        {"ok": {"mechanism": "SCRAM-SHA-512", "username": "alice", "password": "pw"}},
    ]
    messages = [e["message"] for e in out[3:]]
    assert {e["error"] for e in out[3:]} == {"SaslConfigError"}
    assert messages[0] == (
        "sasl.username is set but security.protocol is SSL: set "
        "security.protocol=SASL_SSL to authenticate with it"
    )
    assert messages[1] == (
        "sasl.mechanism=PLAIN: expected one of SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
    )
    assert messages[2] == "security.protocol=SASL_SSL needs sasl.password, a non-empty string"


RFC = """
const sasl = require(process.argv[1]);
const client = new sasl.ScramClient('SCRAM-SHA-256', 'user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
const out = { first: client.clientFirst().toString() };
out.final = client.clientFinal(Buffer.from(
  'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096')).toString();
client.checkServerFinal(Buffer.from('v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4='));
const refusals = [];
for (const [serverFirst, serverFinal] of [
  ['r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', null],
  ['r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1', null],
  ['r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096', 'v=' + 'A'.repeat(44)],
]) {
  const other = new sasl.ScramClient('SCRAM-SHA-256', 'user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
  try {
    other.clientFinal(Buffer.from(serverFirst));
    other.checkServerFinal(Buffer.from(serverFinal));
    refusals.push(null);
  } catch (error) {
    refusals.push([error.name, error.code, error.message]);
  }
}
out.refusals = refusals;
console.log(JSON.stringify(out));
"""


def test_the_client_writes_rfc_7677s_messages_and_checks_the_server() -> None:
    out = run_node_script(RFC, "sasl.js")
    assert out["first"] == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert out["final"] == (
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    names = {refusal[0] for refusal in out["refusals"]}
    assert names == {"SaslAuthenticationError"}
    assert {refusal[1] for refusal in out["refusals"]} == {16}  # UNAUTHENTICATED: not retried
    messages = [refusal[2] for refusal in out["refusals"]]
    assert "does not extend" in messages[0]
    assert "iterations" in messages[1]
    assert "does not hold the credential" in messages[2]


LOGIN = """
const sasl = require(process.argv[1]);
(async () => {
  let clock = 0;
  const asked = [];
  let fail = false;
  const login = new sasl.SaslLogin(async (endpoint) => {
    asked.push(endpoint);
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (fail) throw new sasl.SaslAuthenticationError('wrong password');
    return { ticket: `t${asked.length}`, lifetimeMs: 1000 };
  }, () => clock);
  const out = {};
  out.together = await Promise.all([login.current('a:1'), login.current('b:2')]);
  clock = 799;
  out.reused = await login.current('c:3');
  clock = 800;
  out.refreshed = await login.current('d:4');
  login.drop();
  out.afterDrop = await login.current('e:5');
  login.drop();
  fail = true;
  try {
    await login.current('f:6');
  } catch (error) {
    out.failed = error.message;
  }
  fail = false;
  out.afterFailure = await login.current('g:7');
  out.asked = asked;
  console.log(JSON.stringify(out));
})();
"""


def test_one_exchange_serves_many_calls_until_its_refresh_time() -> None:
    out = run_node_script(LOGIN, "sasl.js")
    assert out["together"] == ["t1", "t1"]
    assert out["reused"] == "t1"
    assert out["refreshed"] == "t2"
    assert out["afterDrop"] == "t3"
    assert out["failed"] == "wrong password"
    assert out["afterFailure"] == "t5"
    assert out["asked"] == ["a:1", "d:4", "e:5", "f:6", "g:7"]
