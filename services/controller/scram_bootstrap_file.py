"""Reads the SCRAM bootstrap file at a controller's start and writes its credentials once the
controller is active (scram_bootstrap.py says what the file holds and why).

The file holds passwords: like the cluster secret (services/runtime/secret.py) it must be a
regular file readable by its owner only (chmod 600), else the controller does not start. Its
credentials are derived at once, each with a fresh random 32-byte salt, and the passwords are
dropped. Each time this controller becomes the active one (its barrier applied: the image is the
whole log), it commits the credentials the image has none for; a failed write is tried again
while it stays active.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import stat
from pathlib import Path

from samsa.common import scram
from samsa.services.controller.driver import ControllerDriver
from samsa.services.controller.scram_bootstrap import (
    BootstrapFileError,
    derive_credentials,
    parse_bootstrap_credentials,
)
from samsa.services.controller.scram_control import bootstrap_credentials

log = logging.getLogger(__name__)

KEY = "sasl.scram.bootstrap.credentials"
# How long a failed bootstrap write waits before the next try, while this controller is active.
RETRY_S = 0.5
# The log line of each pass, naming the credentials it wrote (none when all existed).
BOOTSTRAPPED = "SCRAM bootstrap credentials applied"

Credentials = dict[tuple[str, int], scram.ScramCredential]


def load_bootstrap_credentials(path: Path) -> Credentials:
    """The file's credentials, derived; BootstrapFileError saying what to fix."""
    where = f"{KEY} {path}"
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise BootstrapFileError(f"{where}: cannot read it ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise BootstrapFileError(f"{where}: not a regular file")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BootstrapFileError(
            f"{where} holds passwords and is accessible by other users (mode "
            f"{stat.S_IMODE(mode):04o}): run `chmod 600 {path}`"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BootstrapFileError(f"{where}: not UTF-8 text") from None
    except OSError as error:
        raise BootstrapFileError(f"{where}: cannot read it ({error.strerror})") from None
    try:
        entries = parse_bootstrap_credentials(text)
    except BootstrapFileError as error:
        raise BootstrapFileError(f"{where}: {error}") from None
    salts = [secrets.token_bytes(scram.SALT_BYTES_DEFAULT) for _ in entries]
    return derive_credentials(entries, salts)


def write_on_activation(driver: ControllerDriver, credentials: Credentials) -> asyncio.Task[None]:
    """Start writing the missing credentials each time `driver` becomes active."""
    activated = asyncio.Event()
    driver.on_becoming_active(activated.set)
    if driver.active:
        activated.set()
    return asyncio.create_task(_keep_bootstrapped(driver, credentials, activated))


async def _keep_bootstrapped(
    driver: ControllerDriver, credentials: Credentials, activated: asyncio.Event
) -> None:
    while True:
        await activated.wait()
        activated.clear()
        while driver.active:
            try:
                written = await driver.write(
                    lambda image: bootstrap_credentials(image, credentials)
                )
            except Exception as error:  # NOT_CONTROLLER, a lost commit: try while still active
                log.warning("writing the SCRAM bootstrap credentials failed: %s", error)
                await asyncio.sleep(RETRY_S)
                continue
            # Logged each time, written or not: an operator sees the file was applied.
            log.info(BOOTSTRAPPED, extra={"written": written.response})
            break
