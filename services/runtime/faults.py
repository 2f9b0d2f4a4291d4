"""Fault injection for tests, off unless the `SAMSA_FAULTS` environment variable turns it on.

Theory of operation. Some failures cannot be caused from outside a process at the moment that
matters: a Produce answer lost *after* the leader appended the records is what makes a producer
retry a batch the log already holds, the case idempotence exists for. `SAMSA_FAULTS` names such
points with a probability each, e.g. `SAMSA_FAULTS="produce.drop_answer=0.05"`; the code at the
point asks `faults.fire("produce.drop_answer")` and, when it fires, behaves as the network would
(the broker drops the stream). Every firing is logged, so a test can count them.

Unknown names or probabilities outside [0, 1] refuse to start the process (`check`, called by
service_process.py: one line, exit code 2): a typo must not silently turn a fault test into one
without faults. With the variable unset, `fire` is one
dictionary lookup returning False.
"""

from __future__ import annotations

import logging
import os
import random

log = logging.getLogger(__name__)

ENVIRONMENT_VARIABLE = "SAMSA_FAULTS"
# produce.drop_answer: a broker drops a Produce answer after appending (produce_stream.py).
# txn.lose_markers: a transaction coordinator skips writing a transaction's markers and takes
# them as written (transaction_partition.py): the transaction hangs on its partitions.
KNOWN = frozenset({"produce.drop_answer", "txn.lose_markers"})


def parse(text: str) -> dict[str, float]:
    """`name=probability,name=probability` into a dict; ValueError naming what is wrong."""
    faults: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in KNOWN:
            raise ValueError(
                f"{ENVIRONMENT_VARIABLE}: unknown fault {name!r}; known: {sorted(KNOWN)}"
            )
        try:
            probability = float(value)
        except ValueError:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: {item!r} needs name=probability") from None
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: {name}={value} is not in [0, 1]")
        faults[name] = probability
    return faults


class FaultsConfigError(Exception):
    """SAMSA_FAULTS names an unknown fault or a probability outside [0, 1]."""


def _from_environment() -> tuple[dict[str, float], str | None]:
    """The faults the environment turns on, and what is wrong with it (None: nothing). Read at
    import, where raising would end a service in a traceback; `check` refuses it instead."""
    try:
        return parse(os.environ.get(ENVIRONMENT_VARIABLE, "")), None
    except ValueError as error:
        return {}, str(error)


_ACTIVE, _PROBLEM = _from_environment()
_RANDOM = random.Random()


def check() -> None:
    """Raise FaultsConfigError when SAMSA_FAULTS could not be honoured (a service's start)."""
    if _PROBLEM is not None:
        raise FaultsConfigError(_PROBLEM)


def fire(name: str) -> bool:
    """True when the fault `name` should happen now (and logs that it did)."""
    probability = _ACTIVE.get(name)
    if probability is None or _RANDOM.random() >= probability:
        return False
    log.warning("fault injected", extra={"fault": name})
    return True
