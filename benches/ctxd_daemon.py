"""What the Python benches share: a free port, a JSON POST, latency percentiles, and a `ctxd serve`
started and waited for until /readyz answers 200."""
import json, os, shutil, socket, subprocess, sys, time, urllib.request


def default_ctxd():
    """The release binary in the build cache (`$CARGO_TARGET_DIR`, default ~/.cache/ctxd-target)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/ctxd-target"))
    return os.path.join(target, "release", "ctxd")


def completion_bench_args(ap):
    """The options of the completion benches: the binary and the crate-source corpus and index
    `completion_latency.py` builds in ~/.cache/ctxd/bench-completion (shared by both)."""
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--db", default=os.path.expanduser("~/.cache/ctxd/bench-completion/db"))
    ap.add_argument("--src", default=os.path.expanduser("~/.cache/ctxd/bench-completion/src"))


def percentiles(xs, ps=(50, 90, 99)):
    """`p50 1.2 ms, p90 …, mean … ms` of the latencies `xs` (milliseconds)."""
    xs = sorted(xs)
    cells = [f"p{p} {xs[min(len(xs) - 1, int(p / 100 * len(xs)))]:.1f} ms" for p in ps]
    return ", ".join(cells + [f"mean {sum(xs) / len(xs):.1f} ms"])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(base, path, body, timeout=30):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def start_daemon(ctxd, root, db, ready_within, poll=0.5, work=None):
    """Starts `ctxd serve` watching `root` into `db` (HTTP on a free port, no Flight) and waits
    for readiness; returns (process, base URL, seconds to ready). Exits if it dies or is not
    ready within `ready_within` seconds (deleting the folder `work` first, if given)."""
    return start_serve(ctxd, ["--watch", root, "--db", db], ready_within, poll, work)


def start_serve(ctxd, serve_args, ready_within, poll=0.5, work=None):
    """`start_daemon` with any `ctxd serve` arguments (e.g. `--config FILE`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, CTXD_LOG=os.environ.get("CTXD_LOG", "warn"))
    proc = subprocess.Popen([ctxd, "serve", *serve_args, "--listen", f"127.0.0.1:{port}", "--flight-listen", ""], env=env)
    t0 = time.time()
    while True:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return proc, base, time.time() - t0
        except Exception:
            pass
        if proc.poll() is not None or time.time() - t0 > ready_within:
            proc.terminate()
            if work:
                shutil.rmtree(work, ignore_errors=True)
            sys.exit("daemon did not become ready")
        time.sleep(poll)


def stop_daemon(proc, work):
    """Stops a daemon `start_serve` started and deletes its working folder."""
    proc.terminate()
    proc.wait(timeout=60)
    shutil.rmtree(work, ignore_errors=True)
