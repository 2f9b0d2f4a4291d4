"""Goal: the Node client's TLS settings (clients/node/tls.js) take the Python SDK's and
librdkafka's names and refuse a mistake when the client is made, naming the setting (and the
file): security.protocol PLAINTEXT, SSL or SASL_SSL in any case, SASL_PLAINTEXT refused (SASL
over TLS only), an
ssl.* file with PLAINTEXT refused rather than ignored, a certificate without its key, a missing
file, a file that is not PEM, an encrypted key, a key file in place of a certificate. A client
given good files dials with TLS credentials, one without settings as before (insecure);
example.js takes the same settings as --ssl-* flags and as the SAMSA_* variables. The hint for a
connection refused to a client without a certificate comes only where it may be the reason.

Method: clients/node/tls.js and samsa.js under `node`, no server and no channel (a SamsaClient
dials nothing until its first call); example.js run with settings it refuses before it dials.
Certificates from samsa.cli.certificates in tmp_path.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from node_script import NODE, NODE_DIR, needs_node, run_node_script

from samsa.cli.certificates import create_ca, issue

pytestmark = needs_node

# Each of data's option objects given to `call` (a function of tls.js or samsa.js): what it
# returned (as JSON) or the error's name and message.
EACH = """
const tls = require(process.argv[1]);
const { SamsaClient } = require(require('node:path').join(process.argv[1], '..', 'samsa.js'));
const data = %s;
const calls = {
  locations: (options) => tls.tlsLocations(options),
  secure: (options) => new SamsaClient('a:1', options).credentials._isSecure(),
  pem: ([setting, text, isKey]) => tls.checkPem(setting, 'f.pem', Buffer.from(text), isKey).length,
  hint: ([locations, code, details]) => tls.missingCertificateHint(locations, { code, details }),
};
const outcomes = data.map(([call, argument]) => {
  try {
    return { ok: calls[call](argument) ?? null };
  } catch (error) {
    return { error: error.name, message: error.message };
  }
});
console.log(JSON.stringify(outcomes));
"""


def run(calls: list[tuple[str, object]]) -> list[dict[str, object]]:
    return run_node_script(EACH % json.dumps(calls), "tls.js")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    ca = create_ca(tmp_path)
    client = issue(ca, tmp_path, "client", ["127.0.0.1", "localhost"])
    encrypted = tmp_path / "encrypted-key.pem"
    encrypted.write_text("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n")
    return {
        "ca": str(ca.certificate),
        "cert": str(client.certificate),
        "key": str(client.key),
        "encrypted": str(encrypted),
        "missing": str(tmp_path / "missing.pem"),
    }


def test_the_settings_alone_are_checked_and_named() -> None:
    ssl = {"security.protocol": "SSL"}
    out = run(
        [
            ("locations", {}),
            ("locations", {"security.protocol": "plaintext", "ssl.ca.location": ""}),
            ("locations", {"security.protocol": "ssl"}),
            ("locations", ssl | {"ssl.ca.location": "ca.pem"}),
            ("locations", ssl | {"ssl.certificate.location": "c", "ssl.key.location": "k"}),
            ("locations", {"security.protocol": "SASL_PLAINTEXT"}),
            ("locations", {"security.protocol": "TLS"}),
            ("locations", {"ssl.ca.location": "ca.pem"}),
            ("locations", ssl | {"ssl.certificate.location": "c"}),
            ("locations", ssl | {"ssl.ca.location": 7}),
        ]
    )
    assert out[:5] == [
        {"ok": None},
        {"ok": None},
        {"ok": {"ca": None, "certificate": None, "key": None}},
        {"ok": {"ca": "ca.pem", "certificate": None, "key": None}},
        {"ok": {"ca": None, "certificate": "c", "key": "k"}},
    ]
    errors = out[5:]
    assert {e.get("error") for e in errors} == {"TlsConfigError"}, errors
    messages = [str(e["message"]) for e in errors]
    assert messages[0].startswith("security.protocol=SASL_PLAINTEXT: Samsa sends SASL over TLS")
    assert messages[1] == "security.protocol=TLS: expected PLAINTEXT, SSL or SASL_SSL"
    assert messages[2].startswith("ssl.ca.location is set but security.protocol is PLAINTEXT")
    assert messages[3] == (
        "ssl.certificate.location and ssl.key.location go together: set both or neither"
    )
    assert messages[4] == "ssl.ca.location must be a file path (a string), not number"


def test_the_files_are_read_when_the_client_is_made(files: dict[str, str]) -> None:
    ssl = {"security.protocol": "SSL"}
    pair = {"ssl.certificate.location": files["cert"], "ssl.key.location": files["key"]}
    out = run(
        [
            ("secure", {}),
            ("secure", ssl),
            ("secure", ssl | {"ssl.ca.location": files["ca"]} | pair),
            ("secure", ssl | {"ssl.ca.location": files["missing"]}),
            ("secure", ssl | {"ssl.ca.location": files["key"]}),
            ("secure", ssl | pair | {"ssl.key.location": files["encrypted"]}),
            ("secure", ssl | pair | {"ssl.key.location": files["cert"]}),
        ]
    )
    assert out[:3] == [{"ok": False}, {"ok": True}, {"ok": True}]
    assert {e.get("error") for e in out[3:]} == {"TlsConfigError"}, out
    missing, key_as_ca, encrypted, cert_as_key = (str(e["message"]) for e in out[3:])
    assert missing == (
        f"ssl.ca.location={files['missing']}: cannot read it (ENOENT: no such file or directory)"
    )
    assert key_as_ca == f"ssl.ca.location={files['key']}: no CERTIFICATE block in it"
    assert encrypted.startswith(f"ssl.key.location={files['encrypted']}: the key is encrypted")
    assert cert_as_key == f"ssl.key.location={files['cert']}: no PRIVATE KEY block in it"


def test_a_file_that_is_not_pem_is_named() -> None:
    out = run([("pem", ["ssl.ca.location", "hello", False])])
    assert out == [
        {
            "error": "TlsConfigError",
            "message": "ssl.ca.location=f.pem: not a PEM file (no -----BEGIN line)",
        }
    ]


def test_the_missing_certificate_hint_only_where_it_may_be_the_reason() -> None:
    no_cert = {"ca": "ca.pem", "certificate": None, "key": None}
    with_cert = {"ca": "ca.pem", "certificate": "c", "key": "k"}
    failed = "No connection established. Last error: Failed to connect"
    refused = "No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1"
    out = run(
        [
            ("hint", [no_cert, 14, failed]),
            ("hint", [with_cert, 14, failed]),
            ("hint", [None, 14, failed]),
            ("hint", [no_cert, 14, refused]),
            ("hint", [no_cert, 4, "Deadline exceeded"]),
        ]
    )
    assert "this client has no certificate" in str(out[0]["ok"])
    assert "ssl.certificate.location and ssl.key.location" in str(out[0]["ok"])
    assert [o["ok"] for o in out[1:]] == ["", "", "", ""]


def example(args: list[str], env: dict[str, str]) -> str:
    """example.js's one line of error for settings it refuses before dialling anything."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(NODE_DIR / "example.js"), "--bootstrap", "127.0.0.1:1", *args, "describe", "t"],
        env={"PATH": str(Path(NODE).parent)} | env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1, done.stdout
    return done.stderr.strip()


def test_example_takes_the_settings_as_flags_and_variables(files: dict[str, str]) -> None:
    flag = example(["--ssl-ca-location", files["ca"]], {})
    assert flag.startswith("error: ssl.ca.location is set but security.protocol is PLAINTEXT")
    both = example(["--security-protocol", "SSL", "--ssl-ca-location", files["missing"]], {})
    assert both.startswith(f"error: ssl.ca.location={files['missing']}: cannot read it")
    variables = {"SAMSA_SECURITY_PROTOCOL": "ssl", "SAMSA_SSL_KEY_LOCATION": files["key"]}
    assert example([], variables) == (
        "error: ssl.certificate.location and ssl.key.location go together: set both or neither"
    )
    # A flag wins over its variable.
    certificate = {"SAMSA_SSL_CERTIFICATE_LOCATION": files["missing"]}
    over = example(["--ssl-certificate-location", files["key"]], variables | certificate)
    assert over == f"error: ssl.certificate.location={files['key']}: no CERTIFICATE block in it"
