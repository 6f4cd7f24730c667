#!/usr/bin/env python3
"""Work per shard of a distributed re-embedding (issue 87, item 2): for each N, a copy of an
index is re-embedded by `ctxd reembed --shard I/N` for I = 0..N-1, one after another on this
machine, then `ctxd reembed --commit`. Per shard: the rows of its share, the rows it read and
embedded, the data bytes of its share's fragments (every column, from the report), the bytes the
process read (`/proc/PID/io` `rchar`, page cache included, and that less the model's files, which
every shard loads), its wall time;
per N: the largest shard's share of the rows and bytes (goal ≈ 1/N), the commit's time, and the
projected wall time of N shards on N machines (the slowest shard + the commit).

    python3 benches/reembed_shards.py --ctxd BIN --db INDEX [--model M] [--shards 1,2,4] [--work DIR]

The index is copied per N (the original is left alone). The model defaults to the second
checkpoint the tests install (paraphrase-MiniLM-L3-v2).
"""
import argparse, json, os, shutil, subprocess, tempfile, time


def run_measured(cmd, env):
    """Runs `cmd`; returns (stdout, seconds, rchar, read_bytes) of the process."""
    t0 = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    io = {}
    # Sample /proc/PID/io until the process ends: the last sample is its total.
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/io") as f:
                io = dict(line.split(": ") for line in f.read().split("\n") if ": " in line)
        except OSError:
            pass
        time.sleep(0.05)
    out, err = p.communicate()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err.decode()[-2000:]}")
    return out.decode(), time.time() - t0, int(io.get("rchar", 0)), int(io.get("read_bytes", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--db", required=True, help="an index (a local folder), copied per N")
    ap.add_argument("--model", default="sentence-transformers/paraphrase-MiniLM-L3-v2")
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--block-rows", type=int, default=256)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="ctxd-reembed-shards-")
    env = dict(os.environ, CTXD_LOG="warn", HF_HUB_OFFLINE="1")
    model_dir = os.path.expanduser(f"~/.cache/ctxd/models/{a.model}")
    model_bytes = sum(os.path.getsize(os.path.join(model_dir, f)) for f in os.listdir(model_dir)) \
        if os.path.isdir(model_dir) else 0
    print(f"ctxd: {a.ctxd}; index: {a.db}; model: {a.model}; work: {work}")
    print(f"{'N':>3} {'shard':>6} {'share rows':>10} {'read':>7} {'embedded':>8} {'share MB':>9} "
          f"{'rchar MB':>9} {'- model':>8} {'disk MB':>8} {'seconds':>8}")
    summary = []
    for n in [int(x) for x in a.shards.split(",")]:
        db = os.path.join(work, f"n{n}")
        shutil.rmtree(db, ignore_errors=True)
        shutil.copytree(a.db, db)
        reports = []
        for i in range(n):
            cmd = [a.ctxd, "reembed", "--db", db, "--model", a.model, "--shard", f"{i}/{n}", "--json",
                   "--block-rows", str(a.block_rows)]
            out, secs, rchar, disk = run_measured(cmd, env)
            r = json.loads(out.strip().splitlines()[-1])
            r.update(seconds_wall=secs, rchar=rchar, disk=disk)
            reports.append(r)
            print(f"{n:>3} {r['shard']:>6} {r['share_rows']:>10} {r['rows']:>7} {r['embedded']:>8} "
                  f"{r['share_bytes'] / 1e6:>9.2f} {rchar / 1e6:>9.1f} {(rchar - model_bytes) / 1e6:>8.1f} "
                  f"{disk / 1e6:>8.1f} {secs:>8.1f}", flush=True)
        out, commit_secs, _, _ = run_measured([a.ctxd, "reembed", "--db", db, "--model", a.model, "--commit",
                                               "--json"], env)
        c = json.loads(out.strip().splitlines()[-1])
        total_rows = sum(r["share_rows"] for r in reports)
        total_bytes = sum(r["share_bytes"] for r in reports)
        worst = max(reports, key=lambda r: r["share_rows"])
        slowest = max(r["seconds_wall"] for r in reports)
        summary.append((n, worst["share_rows"] / max(total_rows, 1), max(r["share_bytes"] for r in reports)
                        / max(total_bytes, 1), slowest, commit_secs, c.get("rows"), c.get("staged_rows")))
    print(f"\n{'N':>3} {'largest share: rows':>20} {'bytes':>7} {'slowest shard s':>16} {'commit s':>9} "
          f"{'projected N machines s':>23} {'rows after':>11}")
    for n, rows, bytes_, slowest, commit, after, staged in summary:
        print(f"{n:>3} {rows:>20.3f} {bytes_:>7.3f} {slowest:>16.1f} {commit:>9.1f} {slowest + commit:>23.1f} "
              f"{after!s:>11}")


if __name__ == "__main__":
    main()
