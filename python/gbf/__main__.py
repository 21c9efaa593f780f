"""python -m gbf bench [options]: see gbf/_bench.py or `python -m gbf bench --help`."""

import sys

from ._bench import main

if len(sys.argv) < 2 or sys.argv[1] != "bench":
    print("usage: python -m gbf bench [--help] [--batches ...] [--filter-mib ...] [--backends ...] "
          "[--quick] [--json PATH]", file=sys.stderr)
    sys.exit(2)
sys.exit(main(sys.argv[2:]))
