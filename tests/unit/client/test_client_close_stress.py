"""Goal: closing a client's sync channels while calls are in flight on other threads never takes
the process down (grpc/grpc issues 16290, 19235, 19973: a channel closed under a blocked call
races grpc's C core; a stub made on a closed channel crashes it every time) and never ends a
call with anything but its cancellation or the closed client's error (before, at times, a
ValueError: "Cannot invoke RPC on closed channel!").

Method: a child process (so that a crash is a return code, with faulthandler's traceback) closes
`Channels` again and again for a few seconds, each time under two threads' DescribeTopics to a
server that never answers (one a bare stub call, one ClusterMetadata's retrying read) and a third
thread making stubs on the channel (a stub made on a closed channel was a segmentation fault,
after a few hundred iterations at most; every other time that thread runs alone, so nothing holds
the channel open), at varying moments: before, as and after they issue
their calls (for BUDGET_S, and MIN_ITERATIONS times at least). It exits 0 only if every
iteration ended every call that way.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

BUDGET_S = 3.0
MIN_ITERATIONS = 20  # on a loaded machine too: the child runs past its budget until it made them

CHILD = textwrap.dedent(
    """
    import socket, sys, threading, time
    import grpc
    from samsa.client.channels import Channels
    from samsa.client.cluster_metadata import ClusterMetadata
    from samsa.client.errors import KafkaError
    from samsa.v1 import controller_pb2, controller_pb2_grpc

    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
    request = controller_pb2.DescribeTopicsRequest()
    unexpected = []

    def bare(channels):
        stub = controller_pb2_grpc.ControllerServiceStub(channels.get(endpoint))
        stub.DescribeTopics(request, timeout=60)

    def read(channels):
        ClusterMetadata([endpoint], channels).read("DescribeTopics", request, 60)

    def stubs(channels):  # as read() makes one per attempt, until the closed client refuses
        while True:
            controller_pb2_grpc.ControllerServiceStub(channels.get(endpoint))

    def run(call, channels, started):
        started.set()
        try:
            call(channels)
        except KafkaError:  # the closed client's error (NoBrokersAvailable: "closing")
            pass
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.CANCELLED:
                unexpected.append(repr(error))
        except BaseException as error:
            unexpected.append(repr(error))
        else:
            unexpected.append("answered?")

    iterations, end, least = 0, time.monotonic() + float(sys.argv[1]), int(sys.argv[2])
    while time.monotonic() < end or iterations < least:
        channels = Channels()
        threads = []
        # Every other time, stubs alone: nothing in flight, so close() closes the channel at once.
        for call in (bare, read, stubs) if iterations % 2 else (stubs,):
            started = threading.Event()
            threads.append(threading.Thread(target=run, args=(call, channels, started)))
            threads[-1].start()
            started.wait()
        time.sleep(0.0005 * (iterations % 8) * (iterations % 2))
        channels.close()
        for thread in threads:
            thread.join(10)
            if thread.is_alive():
                sys.exit("a call went on after close()")
        if unexpected:
            sys.exit(f"unexpected: {unexpected}")
        iterations += 1
    print(iterations)
    """
)


def test_closing_under_calls_in_flight_never_crashes() -> None:
    child = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", CHILD, str(BUDGET_S), str(MIN_ITERATIONS)],
        capture_output=True,
        text=True,
        timeout=BUDGET_S + 60,
    )
    assert child.returncode == 0, f"the child ended with {child.returncode}: {child.stderr[-3000:]}"
    assert int(child.stdout.strip()) >= MIN_ITERATIONS
