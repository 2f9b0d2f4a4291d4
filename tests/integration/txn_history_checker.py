"""A history checker for transactional copy-pipelines under faults (consume-transform-produce).

Not a test module: the transaction history test imports it. A pipeline reads input records
(unique values) from a group's partitions and, in one transaction, writes `copied(value)` to the
output topic and commits the group's offsets. At the end the checker gets:

- `inputs`: each input partition's values in offset order;
- `committed_output`: every output record a read_committed reader reads after the run, in full,
  as (partition, offset, value);
- `all_output`: every output data record the log holds (read_uncommitted), committed or not;
- `observed`: every record any read_committed reader returned *during* the run;
- `offsets`: the group's committed offset of each input partition at the end.

It reports, as the issue asks:
- missing / duplicated: input values whose copy is not in the committed output exactly once, for
  the input read so far (the part below the committed offset; every input once everything is
  copied);
- aborted_seen: a record a read_committed reader returned that the final read_committed read
  does not hold at that offset (so it belongs to an aborted transaction);
- offset_mismatch: input partitions whose committed offset disagrees with the committed output
  (the output must hold the copies of exactly the input below the committed offset);
- strays: committed output values that copy no input value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

COPY_PREFIX = b"copy:"

Record = tuple[int, int, bytes]  # (partition, offset, value)


def copied(value: bytes) -> bytes:
    """What a pipeline writes for an input value."""
    return COPY_PREFIX + value


def original(output: bytes) -> bytes | None:
    """The input value an output value copies, or None for a stray."""
    return output[len(COPY_PREFIX) :] if output.startswith(COPY_PREFIX) else None


@dataclass
class PipelineReport:
    inputs: int
    committed_outputs: int
    aborted_outputs: int
    reads_observed: int
    missing: list[bytes]
    duplicated: list[bytes]
    aborted_seen: list[Record]
    offset_mismatch: list[tuple[int, int, int]]  # (input partition, committed offset, copies)
    strays: list[bytes]

    @property
    def ok(self) -> bool:
        return not (
            self.missing
            or self.duplicated
            or self.aborted_seen
            or self.offset_mismatch
            or self.strays
        )

    def summary(self) -> str:
        return (
            f"inputs {self.inputs}, committed outputs {self.committed_outputs}, outputs of "
            f"aborted transactions {self.aborted_outputs}, read_committed reads "
            f"{self.reads_observed}; missing {len(self.missing)}, duplicated "
            f"{len(self.duplicated)}, aborted seen {len(self.aborted_seen)}, offset mismatches "
            f"{len(self.offset_mismatch)}, strays {len(self.strays)}"
        )


def check_pipelines(
    inputs: Mapping[int, Sequence[bytes]],
    committed_output: Iterable[Record],
    all_output: Iterable[Record],
    observed: Iterable[Record],
    offsets: Mapping[int, int],
) -> PipelineReport:
    committed_records = set(committed_output)
    committed = Counter(value for _, _, value in committed_records)
    stored = len(set(all_output))
    seen = list(observed)
    partition_of = {value: p for p, values in inputs.items() for value in values}
    strays = sorted(v for v in committed if original(v) not in partition_of)
    duplicated = sorted(original(v) or v for v, count in committed.items() if count > 1)
    missing: list[bytes] = []
    mismatch: list[tuple[int, int, int]] = []
    for partition, values in sorted(inputs.items()):
        offset = offsets.get(partition, 0)
        below = values[:offset]
        missing += [v for v in below if committed[copied(v)] == 0]
        copies = sum(1 for v in values if committed[copied(v)] > 0)
        if copies != offset or any(committed[copied(v)] for v in values[offset:]):
            mismatch.append((partition, offset, copies))
    aborted_seen = sorted({record for record in seen if record not in committed_records})
    return PipelineReport(
        inputs=sum(len(values) for values in inputs.values()),
        committed_outputs=sum(committed.values()),
        aborted_outputs=stored - len(committed_records),
        reads_observed=len(seen),
        missing=sorted(missing),
        duplicated=duplicated,
        aborted_seen=aborted_seen,
        offset_mismatch=mismatch,
        strays=strays,
    )
