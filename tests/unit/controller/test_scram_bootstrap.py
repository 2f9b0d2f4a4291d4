"""Goal: the SCRAM bootstrap file takes Kafka's --add-scram lines (with comments, blank lines,
quoted values and optional iterations), refuses every bad line naming its number and never its
password, refuses a file others may read, and yields credentials (fresh salts) that check the
passwords it names; `sasl.scram.bootstrap.credentials` is a controller setting.

Method: `parse_bootstrap_credentials` on texts; `load_bootstrap_credentials` on files written in
tmp_path with chosen modes; the config through config_loading.load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.common import scram
from samsa.services.controller.controller_config import ControllerConfig
from samsa.services.controller.scram_bootstrap import (
    BootstrapCredential,
    BootstrapFileError,
    parse_bootstrap_credentials,
)
from samsa.services.controller.scram_bootstrap_file import load_bootstrap_credentials
from samsa.services.runtime import config_loading

GOOD = """# the first users
SCRAM-SHA-256=[name=admin,password=admin-secret]

  SCRAM-SHA-512=[name=alice,password="a,b]c",iterations=8192]
scram-sha-256=[name=alice,password=x=y]
"""


def test_kafkas_lines_comments_quotes_and_defaults() -> None:
    assert parse_bootstrap_credentials(GOOD) == [
        BootstrapCredential(scram.SCRAM_SHA_256, "admin", "admin-secret", 4096),
        BootstrapCredential(scram.SCRAM_SHA_512, "alice", "a,b]c", 8192),
        BootstrapCredential(scram.SCRAM_SHA_256, "alice", "x=y", 4096),
    ]
    assert parse_bootstrap_credentials("\n# nothing\n") == []


@pytest.mark.parametrize(
    "line, says",
    [
        ("SCRAM-SHA-256 [name=a,password=p]", "expected MECHANISM=[name=NAME"),
        ("SCRAM-SHA-256=name=a,password=p", "expected MECHANISM=[name=NAME"),
        ("SCRAM-SHA-1=[name=a,password=p]", "unknown SASL mechanism"),
        ("SCRAM-SHA-256=[password=p]", "name= is missing"),
        ("SCRAM-SHA-256=[name=a]", "password= is missing"),
        ("SCRAM-SHA-256=[name=a,password=]", "the password is empty"),
        ("SCRAM-SHA-256=[name=,password=p]", "a user name has 1 to 255 characters"),
        (f"SCRAM-SHA-256=[name={'n' * 256},password=p]", "a user name has 1 to 255"),
        ("SCRAM-SHA-256=[name=a,password=p,iterations=4095]", "iterations must be 4096 to 16384"),
        ("SCRAM-SHA-256=[name=a,password=p,iterations=16385]", "iterations must be 4096"),
        ("SCRAM-SHA-256=[name=a,password=p,iterations=many]", "a whole number"),
        ("SCRAM-SHA-256=[name=a,password=p,salt=c2FsdA==]", "unknown key 'salt'"),
        ("SCRAM-SHA-256=[name=a,name=b,password=p]", "name= is given twice"),
        ("SCRAM-SHA-256=[name=a,password]", "'password' is not key=value"),
        ('SCRAM-SHA-256=[name=a,password="p]', "no closing quote"),
        ('SCRAM-SHA-256=[name=a,password="p"x]', "expected ',' after the quoted password"),
        ("SCRAM-SHA-256=[name=a,password=p]\nSCRAM-SHA-256=[name=a,password=q]", "on line 2"),
    ],
)
def test_every_bad_line_is_named_by_number_and_never_shows_a_password(line, says) -> None:
    with pytest.raises(BootstrapFileError) as raised:
        parse_bootstrap_credentials("# users\n" + line)
    message = str(raised.value)
    assert message.startswith(("line 2: ", "line 3: ")), message
    assert says in message
    assert "=p]" not in message and '"p' not in message


def test_a_file_of_too_many_lines_is_refused() -> None:
    with pytest.raises(BootstrapFileError, match="at most 1000"):
        parse_bootstrap_credentials("#\n" * 1001)


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "scram.txt"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_loaded_credentials_check_the_passwords_with_fresh_salts(tmp_path: Path) -> None:
    credentials = load_bootstrap_credentials(write(tmp_path, GOOD))
    admin = credentials[("admin", scram.SCRAM_SHA_256.number)]
    assert len(admin.salt) == 32
    assert admin == scram.credential_for_password(scram.SCRAM_SHA_256, "admin-secret", admin.salt)
    assert credentials[("alice", 2)].iterations == 8192
    again = load_bootstrap_credentials(write(tmp_path, GOOD))
    assert again[("admin", 1)].salt != admin.salt


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path, GOOD, mode)
    with pytest.raises(BootstrapFileError, match=f"chmod 600 {path}"):
        load_bootstrap_credentials(path)


def test_a_missing_unreadable_or_bad_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(BootstrapFileError, match=r"sasl\.scram\.bootstrap\.credentials .*cannot"):
        load_bootstrap_credentials(tmp_path / "absent")
    with pytest.raises(BootstrapFileError, match="not a regular file"):
        load_bootstrap_credentials(tmp_path)
    with pytest.raises(BootstrapFileError, match=r"scram\.txt: line 1: unknown key"):
        load_bootstrap_credentials(write(tmp_path, "SCRAM-SHA-256=[user=a,password=p]"))
    binary = write(tmp_path, "")
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(BootstrapFileError, match="not UTF-8"):
        load_bootstrap_credentials(binary)


def test_the_setting_is_a_controller_key_off_by_default() -> None:
    needed = {
        "SAMSA_NODE_ID": "1",
        "SAMSA_LISTENERS": "127.0.0.1:1",
        "SAMSA_RAFT_ADDRESS": "127.0.0.1:2",
        "SAMSA_METADATA_LOG_DIR": "/d",
        "SAMSA_CLUSTER_SECRET_FILE": "/s",
    }
    config = config_loading.load(ControllerConfig, "controller", [], needed)
    assert config.sasl_scram_bootstrap_credentials is None
    environ = needed | {"SAMSA_SASL_SCRAM_BOOTSTRAP_CREDENTIALS": "/etc/samsa/scram.txt"}
    config = config_loading.load(ControllerConfig, "controller", [], environ)
    assert config.sasl_scram_bootstrap_credentials == "/etc/samsa/scram.txt"
