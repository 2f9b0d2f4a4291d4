"""`python -m bench`: every benchmark, printed side by side with its baseline from the same run.

python -m bench                    storage and codec
python -m bench cluster            Samsa next to NATS JetStream and Redis Streams (installs and
                                   starts the peers itself; see bench/cluster_bench.py)
python -m bench replication        Samsa RF=3 (3 brokers) next to a 3-server NATS JetStream
                                   cluster with an R3 stream, and a rolling restart under load
                                   (see bench/replication_bench.py)
python -m bench scale              idle-partition cost at 0, 1,000, 3,000 (--scale-max 10000)
python -m bench groups             consumer groups: subscribe() beside assign(), join time,
                                   failover on a leave and a SIGKILL, produce->consume latency
                                   (see bench/group_bench.py)
python -m bench transactions       transactional produce beside plain, commit latency,
                                   read_committed beside read_uncommitted
                                   (see bench/transaction_bench.py)
python -m bench spark              the Spark source and sink beside spark.range and the SDK
                                   (needs the [spark] extra and Java; see bench/spark_bench.py)
python -m bench observability      produce and consume with metrics on, and with 1 % and 100 %
                                   of records traced, beside both off (see
                                   bench/observability_bench.py)
python -m bench compose            deploy/docker-compose.yml: cold start to healthy, and
                                   produce/consume from a container and from the host, beside
                                   the same cluster on loopback (needs root and Docker; see
                                   bench/compose_bench.py)
python -m bench all                all of them but scale, spark, observability and compose
python -m bench [MODE] --quick     a smoke run: a tenth of the data (local, observability, compose);
                                   a fifth of the records (cluster, replication, spark), with 2
                                   idempotence rounds instead of 3 (cluster); groups: a fifth of
                                   the records and 2 runs of each kind (instead of 5 consumption,
                                   3 join and 3 latency runs); transactions: a fifth of the
                                   records and of the transactions timed (commit latency 40,
                                   where the time goes 10 of each size); scale: 0 and 1,000 only
"""

from __future__ import annotations

import argparse
import platform

from bench import (
    cluster_bench,
    compose_bench,
    group_bench,
    observability_bench,
    replication_bench,
    scale_bench,
    spark_bench,
    transaction_bench,
)
from bench.codec_bench import format_codec_table, run_codec_bench
from bench.storage_bench import run_storage_bench


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "mode",
        nargs="?",
        choices=(
            "local",
            "cluster",
            "replication",
            "scale",
            "groups",
            "transactions",
            "spark",
            "observability",
            "compose",
            "all",
        ),
        default="local",
        help="local: storage and codec (the default); cluster: vs the peers; replication: RF=3 "
        "vs JetStream R3; groups: consumer groups beside assign(); transactions: transactional "
        "produce and read_committed beside their plain counterparts; observability: metrics and "
        "tracing beside both off; compose: docker-compose beside loopback; all: every one but "
        "scale, spark, observability and compose",
    )
    cluster_bench.add_arguments(parser)  # --quick, and the cluster bench's own options
    replication_bench.add_arguments(parser)
    scale_bench.add_arguments(parser)
    group_bench.add_arguments(parser)
    transaction_bench.add_arguments(parser)
    observability_bench.add_arguments(parser)
    args = parser.parse_args()
    if args.mode in ("local", "all"):
        scale = 0.1 if args.quick else 1.0
        print(f"Samsa benchmarks on {platform.python_implementation()} {platform.python_version()}")
        print()
        print("\n".join(run_storage_bench(scale)))
        print()
        print(format_codec_table(run_codec_bench(int(200_000 * scale))))
    if args.mode in ("cluster", "all"):
        if args.mode == "all":
            print()
        cluster_bench.run(args)
    if args.mode in ("replication", "all"):
        if args.mode == "all":
            print()
        replication_bench.run(args)
    if args.mode in ("groups", "all"):  # issue 12; under a minute, so part of "all"
        if args.mode == "all":
            print()
        group_bench.run(args)
    if args.mode in ("transactions", "all"):  # issue 13; part of "all"
        if args.mode == "all":
            print()
        transaction_bench.run(args)
    if args.mode == "spark":  # issue 14; needs PySpark and Java, so not in "all"
        spark_bench.run(args)
    if args.mode == "observability":  # eight fresh clusters, a few minutes; not in "all"
        observability_bench.run(args)
    if args.mode == "compose":  # builds an image and needs root and Docker; not in "all"
        compose_bench.run(args)
    if args.mode == "scale":  # idle partitions at 0 / 1,000 / 3,000 (issue 10); not in "all"
        scale_bench.run(args)


if __name__ == "__main__":
    main()
