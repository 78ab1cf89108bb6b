"""``python -m tilemm``: ``tilemm run`` from Python, the numba example's experiment.

    python -m tilemm [-m M] [-k K] [-n N] [--dtype D] [--kernel K] [--backend B] [--seed S] [--json]

prints the report (``--json``: as JSON) and exits 0 when the result met the bound, 1 when it did
not, 2 on bad input.
"""

import argparse
import json
import sys

import tilemm


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m tilemm",
        description="The numba example's experiment: 1st GPU run (JIT included), 2nd run, CPU, "
        "and the check against an f64 reference.",
    )
    parser.add_argument("-m", type=int, default=256, help="rows of A and C (default 256)")
    parser.add_argument("-k", type=int, help="columns of A, rows of B (default: m)")
    parser.add_argument("-n", type=int, help="columns of B and C (default: m)")
    parser.add_argument("--dtype", default="float32", help="float16, bfloat16, float32, float64, tf32")
    parser.add_argument("--kernel", default="auto", help="auto, or a rung such as tiled:tpb=16")
    parser.add_argument("--backend", help="cpu, wgpu, cuda, hip (with :N for a device)")
    parser.add_argument("--seed", type=int, default=0, help="the random inputs' seed")
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = tilemm.run(
            args.m, args.k, args.n, dtype=args.dtype, kernel=args.kernel,
            backend=args.backend, seed=args.seed,
        )
    except tilemm.TilemmError as e:
        print(f"tilemm: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
