#!/usr/bin/env python3
"""Picks the few corpus files worth committing as seeds (step after `cargo fuzz cmin`).

    tests/fuzz/pick_seeds.py BINARY CMIN_DIR SEED_DIR [--max-files 30] [--max-size 4096]

BINARY is the built target (tests/fuzz/target/x86_64-unknown-linux-gnu/release/<target>), CMIN_DIR the output
of `cargo fuzz cmin`, SEED_DIR tests/fuzz/seeds/<target>. Every file's full coverage is measured with one
libFuzzer `-merge=1` run per file (an empty initial corpus, so its control file lists all of the file's edges
and features). Starting from what the files already in SEED_DIR cover, files are added greedily by new edges,
then new features, then smaller size, until SEED_DIR holds --max-files files or nothing adds coverage. Prints
the chosen paths; copy them into SEED_DIR (RESULTS.md names them cmin-<first 16 hex of the sha1>).
"""
import argparse
import concurrent.futures
import hashlib
import os
import subprocess
import sys
import tempfile


def coverage(binary, path):
    """(edges, features) of one input."""
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(f"{d}/empty")
        os.mkdir(f"{d}/one")
        os.symlink(os.path.abspath(path), f"{d}/one/input")
        subprocess.run(
            [binary, "-merge=1", f"-merge_control_file={d}/ctl", f"{d}/empty", f"{d}/one"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        edges, feats = set(), set()
        with open(f"{d}/ctl", errors="replace") as ctl:
            for line in ctl:
                parts = line.split()
                if parts[:1] == ["FT"]:
                    feats = {int(x) for x in parts[2:]}
                elif parts[:1] == ["COV"]:
                    edges = {int(x) for x in parts[2:]}
        return edges, feats


def sha1(path):
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("cmin_dir")
    ap.add_argument("seed_dir")
    ap.add_argument("--max-files", type=int, default=30)
    ap.add_argument("--max-size", type=int, default=4096)
    a = ap.parse_args()

    seeds = sorted(os.path.join(a.seed_dir, f) for f in os.listdir(a.seed_dir))
    seed_hashes = {sha1(p) for p in seeds}
    cands = sorted(
        os.path.join(a.cmin_dir, f)
        for f in os.listdir(a.cmin_dir)
        if os.path.getsize(os.path.join(a.cmin_dir, f)) <= a.max_size
    )
    cands = [p for p in cands if sha1(p) not in seed_hashes]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        seed_cov = list(ex.map(lambda p: coverage(a.binary, p), seeds))
        cand_cov = dict(zip(cands, ex.map(lambda p: coverage(a.binary, p), cands)))

    edges = set().union(*(e for e, _ in seed_cov)) if seed_cov else set()
    feats = set().union(*(f for _, f in seed_cov)) if seed_cov else set()
    chosen = []
    while len(seeds) + len(chosen) < a.max_files and cand_cov:
        def score(p):
            e, f = cand_cov[p]
            return (len(e - edges), len(f - feats), -os.path.getsize(p), p)

        best = max(cand_cov, key=score)
        e, f = cand_cov.pop(best)
        if not (e - edges or f - feats):
            break
        edges |= e
        feats |= f
        chosen.append(best)
    for p in chosen:
        print(p)
    print(
        f"{len(seeds)} seeds kept, {len(chosen)} added: {len(edges)} edges, {len(feats)} features",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
