"""Goal: the Node client calls retriable (SamsaError.retriable, clients/node/errors.js RETRIABLE)
exactly the codes errors.proto marks "Retriable: yes", which are common/errors.py's RETRIABLE, so
a Node application deciding whether to resend by `error.retriable` decides as the proto says, and
as the Python SDK does. A code added to the proto as retriable fails this test until Node lists
it.

Method: read errors.proto as text, each enum value with the `//` comment block above it; run
clients/node/errors.js under `node` and ask a SamsaError of every proto code whether it is
retriable. No server, no gRPC channel.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from node_script import needs_node, run_node_script

from samsa.common.errors import RETRIABLE

pytestmark = needs_node

ERRORS_PROTO = Path(__file__).resolve().parents[3] / "proto" / "samsa" / "v1" / "errors.proto"
# An enum value with the comment block right above it.
VALUE_WITH_COMMENT = re.compile(r"((?:^ *//[^\n]*\n)+) *(ERROR_CODE_\w+) = -?\d+;", re.MULTILINE)
SCRIPT = """
const { SamsaError } = require(process.argv[1]);
const codes = %s;
console.log(JSON.stringify(codes.filter((code) => new SamsaError(code).retriable)));
"""


def proto_retriable() -> tuple[list[str], set[str]]:
    """Every code of errors.proto, and those its comments mark "Retriable: yes"."""
    found = VALUE_WITH_COMMENT.findall(ERRORS_PROTO.read_text())
    assert len(found) > 50, "errors.proto no longer reads as expected"
    return [name for _, name in found], {
        name for comment, name in found if "Retriable: yes" in comment
    }


def test_node_retriable_codes_are_the_ones_errors_proto_marks() -> None:
    codes, marked = proto_retriable()
    retriable = run_node_script(SCRIPT % json.dumps(codes), "errors.js")
    assert set(retriable) == marked, (
        f"retriable in errors.proto, not in Node: {sorted(marked - set(retriable))}; "
        f"retriable in Node, not in errors.proto: {sorted(set(retriable) - marked)}"
    )
    assert marked == {f"ERROR_CODE_{code.name}" for code in RETRIABLE}  # and the Python SDK's
