"""The broker's clean-shutdown file (KIP-966): did its last stop close every log?

Why: nothing is fsynced by default, so a broker that crashed or lost power may come back without
the unflushed tail of its logs, records it had acknowledged among them. The controller must then
stop counting it as holding every committed record (services/controller/eligible_leaders.py); it
learns which case it is from RegisterBrokerRequest.previous_broker_epoch.

How: at the very end of a clean stop, once every log is closed (flushed), the broker writes its
broker epoch into `<data dir>/BROKER_CLEAN_SHUTDOWN_FILE`, atomically and fsynced
(checkpoint_file.py). At start it reads the file and deletes it durably (directory fsync) before
it registers, so a crash of this run is never mistaken for a clean stop; no file, or one it
cannot read, is NO_EPOCH: an unclean stop, or a new data directory. A broker that never
registered writes none: it has no epoch to name, and its logs may hold an unclean stop's loss.
"""

from __future__ import annotations

from pathlib import Path

from samsa.services.broker.log.checkpoint_file import (
    fsync_directory,
    read_if_exists,
    write_atomically,
)

BROKER_CLEAN_SHUTDOWN_FILE = ".broker-clean-shutdown"
NO_EPOCH = -1


def take_previous_broker_epoch(data_dir: Path) -> int:
    """The broker epoch the last run stopped cleanly under (NO_EPOCH: it did not), the file
    deleted durably first."""
    path = data_dir / BROKER_CLEAN_SHUTDOWN_FILE
    data = read_if_exists(path)
    if data is None:
        return NO_EPOCH
    path.unlink()
    fsync_directory(data_dir)
    try:
        epoch = int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return NO_EPOCH
    return epoch if epoch >= 0 else NO_EPOCH


def mark_clean_shutdown(data_dir: Path, broker_epoch: int) -> None:
    """Record a clean stop under `broker_epoch`; call only once every log is closed."""
    if broker_epoch >= 0:
        write_atomically(data_dir / BROKER_CLEAN_SHUTDOWN_FILE, f"{broker_epoch}\n".encode())
