"""`python -m bench`: every benchmark, printed side by side with its baseline from the same run.

python -m bench            storage and codec
python -m bench --quick    a tenth of the data, for a smoke run
"""

from __future__ import annotations

import argparse
import platform

from bench.codec_bench import format_codec_table, run_codec_bench
from bench.storage_bench import run_storage_bench


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tenth of the data")
    args = parser.parse_args()
    scale = 0.1 if args.quick else 1.0
    print(f"Samsa benchmarks on {platform.python_implementation()} {platform.python_version()}")
    print()
    print("\n".join(run_storage_bench(scale)))
    print()
    print(format_codec_table(run_codec_bench(int(200_000 * scale))))


if __name__ == "__main__":
    main()
