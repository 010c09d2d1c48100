#!/usr/bin/env python3
"""Sequence-length histogram of a real text corpus, for a scenario's `seq_mix:`.

Each document is one training sequence of a byte-level tokenizer (one token per byte, as the
live model's datasets/text tokenizer), grouped by length into power-of-two buckets (HF
Transformers' `group_by_length`-style batching: an iteration's sequences share a bucket) and
truncated at --max-seq. Prints the YAML lines of `seq_mix:` with the corpus, file count and
command, so a scenario records where its lengths come from.

  scripts/reproduce/seq_length_mix.py                       # Debian's /usr/share/doc/*/copyright files
  scripts/reproduce/seq_length_mix.py --glob '/usr/share/common-licenses/*' --max-seq 4096
"""
import argparse
import glob
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--glob", default="/usr/share/doc/*/copyright",
                    help="documents of the corpus (default: every Debian package's copyright file)")
    ap.add_argument("--min-seq", type=int, default=512, help="smallest bucket (default 512)")
    ap.add_argument("--max-seq", type=int, default=4096,
                    help="largest bucket; longer documents are truncated to it (default 4096)")
    args = ap.parse_args()
    if args.min_seq < 1 or args.max_seq < args.min_seq:
        ap.error("need 1 <= --min-seq <= --max-seq")
    files = sorted(f for f in glob.glob(args.glob) if os.path.isfile(f))
    if not files:
        print(f"seq_length_mix.py: no file matches {args.glob!r}", file=sys.stderr)
        return 2
    buckets = []
    b = args.min_seq
    while b < args.max_seq:
        buckets.append(b)
        b *= 2
    buckets.append(args.max_seq)
    counts = [0] * len(buckets)
    for f in files:
        n = os.path.getsize(f)
        k = next((i for i, b in enumerate(buckets) if n <= b), len(buckets) - 1)
        counts[k] += 1
    print(f"  # {len(files)} documents of {args.glob}, one byte = one token, bucketed by length")
    print(f"  # (truncated at {args.max_seq}): scripts/reproduce/seq_length_mix.py --glob '{args.glob}'"
          f" --min-seq {args.min_seq} --max-seq {args.max_seq}")
    print(f"  lengths: [{', '.join(str(b) for b in buckets)}]")
    print(f"  weights: [{', '.join(str(c) for c in counts)}]   # documents per bucket")
    return 0


if __name__ == "__main__":
    sys.exit(main())
