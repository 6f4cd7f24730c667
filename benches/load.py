#!/usr/bin/env python3
"""Load: many concurrent clients on POST /v1/search against `ctxd serve`, with and without
the writer ingesting meanwhile (and, optionally, spread over several `--role reader`s).

Corpus: the CoSQA code-search set (6,267 Python files, 500 dev queries). The corpus is copied
once into a folder (~/.cache/ctxd/bench-load/src; `--files N`: only the first N), made a git
repository, and indexed once as two named sources (`ctxd index --config`, timed; later runs
reuse both): `code`, the folder (watched), and `history`, the repository's `main` read from git
(only the ingested files, polled every 2 s) — so while ingesting the writer sees edits and git
commits.

Each run: `--clients` threads (default 50), each with its own keep-alive connection, send
routed searches (`k` 10, default rescoring) back to back for `--seconds` (default 30). Two
query mixes, reported separately:

* `repeat`: each client cycles through the 500 queries in its own shuffled order (real
  repetition: the answer cache may hit);
* `unique`: every request's query gets a distinct number appended, so no answer can come
  from a cache (the cost of real work; the route stays the same, printed per run).

A 503 answer is counted (with or without `Retry-After`) and the client waits `Retry-After`
seconds before its next request (`--ignore-retry-after`: it does not). Latency percentiles
are of answered (200) requests; QPS = answered requests / wall time of the run (requests
started within `--seconds`, all waited for). After each run the deltas of the daemon's
/metrics: answer cache hits/carried hits/stale hits/joined/misses (and, from the answers, how many
said `carried_ms` or `stale_ms` and how old), 503s by reason, queue wait p50/p99 (histogram buckets),
the most queries seen waiting/running (sampled every 0.5 s), and the CPU the daemon used.

Scenarios (`--scenarios`, default `idle,ingest`):

* `idle`: one daemon (`--role both`, watching SRC), no writes; first a `--baseline-clients` (1)
  run of each mix: the unloaded latency;
* `ingest`: the same daemon while the writer ingests. By default an editor writes `--edit-rate`
  (20) files a second into the watched folder for the whole run — `--ingest-files` (300) SciFact
  abstracts, each written first and then rewritten again and again (every write with a word of
  its own) — and commits them to git every `--git-commit-secs` (10) s; the time from the last
  write to its word being searchable is reported (freshness). With `--edit-rate 0` (the earlier
  bench) the 300 files are copied at once at the start of the run and the time until every one
  is searchable (bm25 on a run token) is reported, waiting past the run if needed
  (`--ingest-wait`);
* `after`: the same daemon once the ingest runs are over and their last write is searchable
  (their edits left in place; the writer may still be committing and folding what they left):
  the index as editing left it (its fragments, deletions and full-text segments) without the
  editor — whether an editing run's slower questions come from the index's shape or from the
  work beside them;
* `writer`: the same daemon, no clients: the editor alone for `--seconds`, and the CPU the daemon
  used for it (what the writer's own work costs, beside the queries);
* `readers`: the index is uploaded to a moto S3 bucket and 1, 2, 3 `--role reader` processes
  serve it (`--readers 1,2,3`), the clients spread over them round robin.

    python3 benches/load.py [--ctxd BIN] [--profile debug|release] [--clients 50] [--seconds 30]
        [--mixes repeat,unique] [--scenarios idle,ingest[,after,writer,readers]] [--admission auto|on|off]
        [--edit-rate 20] [--git-commit-secs 10] [--max-concurrent 0 --max-queued 64 --queue-timeout-ms 2000]
        [--distinct N] [--json-out FILE]

`--distinct 20`: only the first 20 queries (the repeat mix then repeats a lot: shows whether
the answer cache serves them under load). Exit status 0 unless `ctxd index` fails (a daemon
that dies or never gets ready is reported with its last log lines).

Beside it: `load_probe.py` (what is read of the processes and the daemon's /metrics),
`load_edit.py` (the editor and the one-shot copy the ingest runs use), `load_tail.py` (where a
run's tail comes from).
"""
import argparse, http.client, json, math, os, random, shutil, signal, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_tail import WRITER_METRICS, pct, tail_causes, tail_lines  # noqa: E402
from load_probe import (  # noqa: E402
    by_label, by_thread, delta, get, histogram_quantile, loadavg, metric_sum, proc_cpu_seconds,
    proc_rss_mb, scrape, thread_cores, thread_cpu_seconds, version_of,
)
from load_edit import INGEST_PREFIX, edit_side, git, git_commit, ingest_side, remove_ingested  # noqa: E402
from ctxd_daemon import default_ctxd, free_port  # noqa: E402

HOME = os.path.expanduser("~")
WORK = os.path.join(HOME, ".cache/ctxd/bench-load")
COSQA = "/work/shared/eval/cosqa"
CLIENT_TIMEOUT = 120.0


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------- daemons


class Daemon:
    """A `ctxd serve` with its log in a file."""

    def __init__(self, ctxd, serve_args, log_path, env_extra=None, name="serve"):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.name = name
        env = dict(os.environ, CTXD_LOG=os.environ.get("CTXD_LOG", "warn"), **(env_extra or {}))
        self.cmd = [ctxd, "serve", *serve_args, "--listen", f"127.0.0.1:{self.port}", "--flight-listen", "127.0.0.1:0"]
        self.logf = open(log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, env=env, stdout=self.logf, stderr=subprocess.STDOUT)
        self.started = time.time()

    def wait_ready(self, within):
        while True:
            try:
                status, _ = get(self.base, "/readyz", timeout=5)
                if status == 200:
                    return time.time() - self.started
            except Exception:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before ready; log {self.log_path}:\n{self.tail()}")
            if time.time() - self.started > within:
                raise RuntimeError(f"{self.name} not ready within {within} s; log {self.log_path}:\n{self.tail()}")
            time.sleep(0.5)

    def alive(self):
        return self.proc.poll() is None

    def tail(self, n=20):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        return self.proc.returncode


# ---------------------------------------------------------------- load


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = []  # seconds, answered (200)
        self.rejected_retry_after = 0  # 503 with Retry-After
        self.rejected_other = 0  # 503 without Retry-After
        self.errors = {}  # kind -> count
        self.routes = {}
        self.stale_ms = []  # stale_ms of the answers served from a superseded version
        self.carried_ms = []  # carried_ms of the answers carried across commits
        self.sent = 0
        self.reject_latencies = []
        self.timeline = []  # (monotonic time sent, seconds, HTTP status) of every answer

    def error(self, kind):
        with self.lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1


def client_loop(idx, host, port, queries, mix, deadline, stats, args, run_tag):
    rng = random.Random(f"{run_tag}-{idx}")
    run_num = sum(map(ord, run_tag)) % 900 + 100
    order = list(queries)
    rng.shuffle(order)
    conn = None
    n = 0
    local_lat, local_routes, local_rej, local_stale, local_carried, local_timeline = [], {}, [], [], [], []
    while time.monotonic() < deadline:
        q = order[n % len(order)]
        if mix == "unique":
            # A distinct number per request: no two requests share an answer-cache key.
            # (digits only: a word with letters could look like an identifier and change the route)
            q = f"{q} {run_num}{idx:03d}{n:06d}"
        n += 1
        body = json.dumps({"query": q, "k": args.k, "mode": "routed"}).encode()
        if conn is None:
            conn = http.client.HTTPConnection(host, port, timeout=CLIENT_TIMEOUT)
        sent_at, t0 = time.monotonic(), time.perf_counter()
        try:
            conn.request("POST", "/v1/search", body=body, headers={"content-type": "application/json"})
            resp = conn.getresponse()
            payload = resp.read()
            dt = time.perf_counter() - t0
            status = resp.status
            retry_after = resp.getheader("Retry-After")
            if resp.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except Exception as e:  # connection refused/reset, timeout, ...
            stats.error(type(e).__name__)
            if conn is not None:
                conn.close()
            conn = None
            with stats.lock:
                stats.sent += 1
            time.sleep(0.1)
            continue
        with stats.lock:
            stats.sent += 1
        local_timeline.append((sent_at, dt, status))
        if status == 200:
            local_lat.append(dt)
            try:
                answer = json.loads(payload)
                route = answer.get("route", "?")
                if answer.get("stale_ms") is not None:
                    local_stale.append(answer["stale_ms"])
                if answer.get("carried_ms") is not None:
                    local_carried.append(answer["carried_ms"])
            except ValueError:
                route = "?bad-json"
            local_routes[route] = local_routes.get(route, 0) + 1
        elif status == 503:
            local_rej.append(dt)
            if retry_after is not None:
                with stats.lock:
                    stats.rejected_retry_after += 1
                if not args.ignore_retry_after:
                    try:
                        wait = float(retry_after)
                    except ValueError:
                        wait = 1.0
                    time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
            else:
                with stats.lock:
                    stats.rejected_other += 1
                stats.error("503-without-Retry-After")
        else:
            stats.error(f"HTTP {status}: {payload[:120].decode(errors='replace')}")
    if conn is not None:
        conn.close()
    with stats.lock:
        stats.latencies.extend(local_lat)
        stats.reject_latencies.extend(local_rej)
        stats.stale_ms.extend(local_stale)
        stats.carried_ms.extend(local_carried)
        stats.timeline.extend(local_timeline)
        for r, c in local_routes.items():
            stats.routes[r] = stats.routes.get(r, 0) + c


class Sampler(threading.Thread):
    """Samples the admission gauges every 0.5 s (max queued / in flight) and, given the first
    daemon's pid, its writer's counters and CPU per thread name (`series`, read by
    `load_tail.tail_causes`)."""

    def __init__(self, bases, pid=None):
        super().__init__(daemon=True)
        self.bases = bases
        self.pid = pid
        self.stop_event = threading.Event()
        self.max_queued = 0.0
        self.max_in_flight = 0.0
        self.samples = 0
        self.series = []  # (monotonic time, {WRITER_METRICS key: value}, {thread name: CPU s})

    def run(self):
        while not self.stop_event.is_set():
            queued = in_flight = 0.0
            seen = False
            for i, b in enumerate(self.bases):
                m = scrape(b)
                if m:
                    seen = True
                    if i == 0 and self.pid is not None:
                        writer = {k: metric_sum(m, name, f) for k, name, f in WRITER_METRICS}
                        self.series.append((time.monotonic(), writer, thread_cpu_seconds(self.pid)))
                queued = max(queued, metric_sum(m, "ctxd_query_queued"))
                in_flight = max(in_flight, metric_sum(m, "ctxd_query_in_flight"))
            if seen:
                self.samples += 1
                self.max_queued = max(self.max_queued, queued)
                self.max_in_flight = max(self.max_in_flight, in_flight)
            self.stop_event.wait(0.5)


def run_load(targets, queries, mix, args, scenario, run_tag, daemons, during=None, clients=None, helper=None):
    """One run of `clients` (default `args.clients`) clients on `targets` (daemons' base URLs,
    round robin)."""
    clients = clients or args.clients
    la = loadavg()
    log(f"\n--- run: scenario={scenario} mix={mix} clients={clients} seconds={args.seconds} targets={len(targets)}  loadavg before: {la}")
    before = [scrape(t) for t in targets]
    cpu0 = [proc_cpu_seconds(d.proc.pid) for d in daemons]
    threads0 = thread_cpu_seconds(daemons[0].proc.pid) if daemons else {}
    helper0 = proc_cpu_seconds(helper.pid) if helper else None
    own0 = os.times()
    stats = Stats()
    sampler = Sampler(targets, daemons[0].proc.pid if daemons else None)
    sampler.start()
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    hosts = [(t.split("//")[1].split(":")[0], int(t.rsplit(":", 1)[1])) for t in targets]
    threads = [
        threading.Thread(
            target=client_loop,
            args=(i, *hosts[i % len(hosts)], queries, mix, deadline, stats, args, run_tag),
            daemon=True,
        )
        for i in range(clients)
    ]
    for th in threads:
        th.start()
    side = during(t0) if during else None
    for th in threads:
        th.join(timeout=args.seconds + CLIENT_TIMEOUT + 30)
    hung = sum(th.is_alive() for th in threads)
    wall = time.monotonic() - t0
    sampler.stop_event.set()
    sampler.join(timeout=40)
    own1 = os.times()
    cpu1 = [proc_cpu_seconds(d.proc.pid) for d in daemons]
    threads1 = thread_cpu_seconds(daemons[0].proc.pid) if daemons else {}
    helper1 = proc_cpu_seconds(helper.pid) if helper else None
    after = [scrape(t) for t in targets]
    lat = sorted(stats.latencies)
    answered = len(lat)

    def msum(fn):
        return sum(fn(b, a) for b, a in zip(before, after))

    rejected = {}
    for b, a in zip(before, after):
        for k, v in by_label(b, a, "ctxd_query_rejected_total", "reason").items():
            rejected[k] = rejected.get(k, 0) + v
    # Queue wait over all targets: merge the bucket deltas by summing scrapes.
    merged_b, merged_a = {}, {}
    for b, a in zip(before, after):
        for k, v in b.items():
            merged_b[k] = merged_b.get(k, 0.0) + v
        for k, v in a.items():
            merged_a[k] = merged_a.get(k, 0.0) + v
    qw50 = histogram_quantile(merged_b, merged_a, "ctxd_query_queue_wait_seconds", 0.5)
    qw99 = histogram_quantile(merged_b, merged_a, "ctxd_query_queue_wait_seconds", 0.99)
    waited = delta(merged_b, merged_a, "ctxd_query_queue_wait_seconds_count")
    fresh50 = histogram_quantile(merged_b, merged_a, "ctxd_pipeline_freshness_seconds", 0.5)
    fresh99 = histogram_quantile(merged_b, merged_a, "ctxd_pipeline_freshness_seconds", 0.99)
    srv50 = histogram_quantile(merged_b, merged_a, "ctxd_query_duration_seconds", 0.5)
    srv99 = histogram_quantile(merged_b, merged_a, "ctxd_query_duration_seconds", 0.99)
    rr_count = delta(merged_b, merged_a, "ctxd_query_rerank_duration_seconds_count")
    daemon_cpu = sum(c1 - c0 for c0, c1 in zip(cpu0, cpu1))
    client_cpu = (own1.user - own0.user) + (own1.system - own0.system)
    row = {
        "scenario": scenario,
        "mix": mix,
        "clients": clients,
        "targets": len(targets),
        "seconds": args.seconds,
        "wall_s": round(wall, 2),
        "loadavg_before": la,
        "sent": stats.sent,
        "answered": answered,
        "qps": answered / wall if wall else float("nan"),
        "p50_ms": pct(lat, 0.50) * 1000,
        "p90_ms": pct(lat, 0.90) * 1000,
        "p99_ms": pct(lat, 0.99) * 1000,
        "max_ms": (lat[-1] * 1000) if lat else float("nan"),
        "r503_retry_after": stats.rejected_retry_after,
        "r503_no_retry_after": stats.rejected_other,
        "r503_latency_p50_ms": pct(sorted(stats.reject_latencies), 0.5) * 1000,
        "other_errors": sum(v for k, v in stats.errors.items() if k != "503-without-Retry-After"),
        "error_kinds": stats.errors,
        "hung_clients": hung,
        "routes": stats.routes,
        "cache_hits": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_hits_total"))),
        "cache_misses": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_misses_total"))),
        "cache_stale_hits": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_stale_hits_total"))),
        "cache_joined": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_joined_total"))),
        "cache_revalidations": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_revalidations_total"))),
        "cache_uncarried": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_uncarried_total"))),
        "cache_carried_hits": int(msum(lambda b, a: delta(b, a, "ctxd_query_answer_cache_carried_hits_total"))),
        "carried_answers": len(stats.carried_ms),
        "carried_ms_p50": pct(sorted(stats.carried_ms), 0.5),
        "carried_ms_max": max(stats.carried_ms) if stats.carried_ms else None,
        "stale_answers": len(stats.stale_ms),
        "stale_ms_p50": pct(sorted(stats.stale_ms), 0.5),
        "stale_ms_max": max(stats.stale_ms) if stats.stale_ms else None,
        "rejected_by_reason": rejected,
        "queue_waited": int(waited),
        "queue_wait_p50_ms": None if qw50 is None else qw50 * 1000,
        "queue_wait_p99_ms": None if qw99 is None else qw99 * 1000,
        "server_query_p50_ms": None if srv50 is None else srv50 * 1000,
        "server_query_p99_ms": None if srv99 is None else srv99 * 1000,
        "reranks": int(rr_count),
        # LanceDB's index cache (vector partitions, posting lists): a miss reads and decodes again.
        "lance_index_cache_hits": int(delta(merged_b, merged_a, "ctxd_index_cache_hits_total", 'cache="index"')),
        "lance_index_cache_misses": int(delta(merged_b, merged_a, "ctxd_index_cache_misses_total", 'cache="index"')),
        "commits": int(delta(merged_b, merged_a, "ctxd_index_commits_total")),
        "rows_inserted": int(delta(merged_b, merged_a, "ctxd_index_rows_inserted_total")),
        **writer_work(merged_b, merged_a),
        "freshness_p50_s": fresh50,
        "freshness_p99_s": fresh99,
        "max_queued_seen": int(sampler.max_queued),
        "max_in_flight_seen": int(sampler.max_in_flight),
        "daemon_cpu_cores": daemon_cpu / wall if wall else float("nan"),
        # The first daemon's CPU by thread name (the model's ctxd-embed, tokio workers, Lance's lance-cpu).
        "daemon_threads_cores": thread_cores(threads0, threads1, wall),
        "client_cpu_cores": client_cpu / wall if wall else float("nan"),
        "moto_cpu_cores": None if helper is None else (helper1 - helper0) / wall,
        "daemon_rss_mb": [round(proc_rss_mb(d.proc.pid)) for d in daemons],
        "daemons_alive": all(d.alive() for d in daemons),
    }
    if side is not None:
        row.update(side())
    row["tail"] = tail_causes(stats.timeline, t0, row.get("git_commit_times", []), sampler.series)
    # The writer's counters by sample, against the run's start (CPU by thread left out: it is in the tail).
    row["writer_samples"] = [(round(t - t0, 3), m) for t, m, _ in sampler.series]
    row["git_commit_times"] = [round(t - t0, 3) for t in row.get("git_commit_times", [])]
    row["t0_mono"] = t0  # time.monotonic() at the start: lines the run up with a `perf record -k CLOCK_MONOTONIC`
    row["answer_done"] = sorted(round(sent + dt - t0, 3) for sent, dt, status in stats.timeline if status == 200)
    print_row(row)
    for d in daemons:
        if not d.alive():
            log(f"!!! {d.name} died (exit {d.proc.returncode}); last log lines:\n{d.tail()}")
    return row


def fmt_ms(v):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0f}"


def fmt_s(v):
    return "-" if v is None else f"{v:.1f} s"


def print_row(r):
    log(
        f"{'scenario':<8} {'mix':<7} {'clients':>7} {'secs':>5} {'answered':>8} {'QPS':>6} {'p50ms':>6} {'p90ms':>6} "
        f"{'p99ms':>6} {'maxms':>6} {'503(RA)':>7} {'503(noRA)':>9} {'other':>5}"
    )
    log(
        f"{r['scenario']:<8} {r['mix']:<7} {r['clients']:>7} {r['wall_s']:>5.0f} {r['answered']:>8} {r['qps']:>6.1f} "
        f"{fmt_ms(r['p50_ms']):>6} {fmt_ms(r['p90_ms']):>6} {fmt_ms(r['p99_ms']):>6} {fmt_ms(r['max_ms']):>6} "
        f"{r['r503_retry_after']:>7} {r['r503_no_retry_after']:>9} {r['other_errors']:>5}"
    )
    log(
        f"  metrics: answer cache hits {r['cache_hits']} / carried {r['cache_carried_hits']} / stale {r['cache_stale_hits']} / joined {r['cache_joined']} / misses {r['cache_misses']} (background revalidations {r['cache_revalidations']}; versions nothing was carried to {r['cache_uncarried']}); "
        f"carried answers seen by clients {r['carried_answers']} (carried_ms p50 {fmt_ms(r['carried_ms_p50'])}, max {fmt_ms(r['carried_ms_max'])}); "
        f"stale answers seen by clients {r['stale_answers']} (stale_ms p50 {fmt_ms(r['stale_ms_p50'])}, max {fmt_ms(r['stale_ms_max'])}); rejected by reason {r['rejected_by_reason'] or '{}'}; "
        f"queue waits {r['queue_waited']} (p50 {fmt_ms(r['queue_wait_p50_ms'])} ms, p99 {fmt_ms(r['queue_wait_p99_ms'])} ms); "
        f"server query p50 {fmt_ms(r['server_query_p50_ms'])} ms p99 {fmt_ms(r['server_query_p99_ms'])} ms; reranks {r['reranks']}; "
        f"Lance index cache hits {r['lance_index_cache_hits']} / misses {r['lance_index_cache_misses']} "
        f"({r['lance_index_cache_misses'] / max(r['cache_misses'], 1):.1f} misses per computed answer)"
    )
    log(
        f"  max seen: queued {r['max_queued_seen']}, in flight {r['max_in_flight_seen']}; 503 answered in p50 {fmt_ms(r['r503_latency_p50_ms'])} ms; "
        f"daemon CPU {r['daemon_cpu_cores']:.2f} cores, client CPU {r['client_cpu_cores']:.2f} cores; daemon RSS {r['daemon_rss_mb']} MB; "
        + (f"moto CPU {r['moto_cpu_cores']:.2f} cores; " if r.get("moto_cpu_cores") is not None else "")
        + f"routes {r['routes']}; sent {r['sent']}"
    )
    for line in tail_lines(r.get("tail")):
        log(line)
    if r.get("daemon_threads_cores"):
        log("    daemon CPU by thread: " + by_thread(r["daemon_threads_cores"], 6))
    if r["error_kinds"]:
        log(f"  errors: {r['error_kinds']}")
    if r["hung_clients"]:
        log(f"  !!! {r['hung_clients']} client threads still blocked after the join timeout")
    if "edit_files" in r:
        s = r.get("last_edit_searchable_s")
        log(
            f"  ingest: {r['edits']} writes ({r['edit_rate_s']:.1f} files/s) of {r['edit_files']} files, {r['git_commits']} git commits; "
            f"the last write searchable after {'%.1f s' % s if s is not None else 'NOT within the wait'}; "
            f"versions {r.get('version_before')} -> {r.get('version_after')}; {r['commits']} commits, {r['rows_inserted']} rows inserted "
            f"during the run; daemon freshness (change -> commit) p50 {fmt_s(r['freshness_p50_s'])} p99 {fmt_s(r['freshness_p99_s'])}"
        )
    if "edit_files" in r or "ingest_files" in r:
        log("  writer during the run: " + writer_work_line(r))
    if "ingest_files" in r:
        s = r.get("ingest_all_searchable_s")
        log(
            f"  ingest: {r['ingest_files']} files copied in {r['ingest_copy_s']:.1f} s; all searchable after "
            f"{'%.1f s' % s if s is not None else 'NOT within the wait (%s searchable)' % r.get('ingest_searchable_at_give_up')}; "
            f"versions {r.get('version_before')} -> {r.get('version_after')}; {r['commits']} commits, {r['rows_inserted']} rows inserted "
            f"during the run; daemon freshness (change -> commit) p50 {fmt_s(r['freshness_p50_s'])} p99 {fmt_s(r['freshness_p99_s'])}"
        )


# ---------------------------------------------------------------- ingest


def writer_work(before, after):
    """The writer's throughput between two scrapes, against the editor's demand: files the watcher
    reported from events, files the loader found unchanged, chunks the model embedded and chunks
    whose vector was reused, files committed."""
    return {
        "watch_events": int(delta(before, after, "ctxd_watch_files_total", 'origin="event"')),
        "load_unchanged": int(delta(before, after, "ctxd_load_skipped_total", 'reason="unchanged"')),
        "chunks_embedded": int(delta(before, after, "ctxd_embed_chunks_total")),
        "chunks_reused": int(delta(before, after, "ctxd_embed_cache_hits_total")),
        "files_committed": int(delta(before, after, "ctxd_upsert_files_total")),
    }


def writer_work_line(w):
    return (
        f"{w['watch_events']} files reported by the watcher, {w['load_unchanged']} found unchanged, "
        f"{w['chunks_embedded']} chunks embedded ({w['chunks_reused']} vectors reused), {w['files_committed']} files committed"
    )


def writer_scenario(daemon, args, tag):
    """The editor alone (no clients) for `args.seconds`: the daemon's CPU for the writer's work."""
    during = edit_side(daemon.base, args.src, args.ingest_files, f"w{tag}", args)
    c0, t0, th0 = proc_cpu_seconds(daemon.proc.pid), time.monotonic(), thread_cpu_seconds(daemon.proc.pid)
    m0 = scrape(daemon.base)
    finish = during(t0)
    time.sleep(args.seconds)
    cpu, wall = proc_cpu_seconds(daemon.proc.pid) - c0, time.monotonic() - t0
    cores = thread_cores(th0, thread_cpu_seconds(daemon.proc.pid), wall)
    work = writer_work(m0, scrape(daemon.base))
    info = finish()
    log(
        f"\n--- writer alone: {info['edits']} writes in {args.seconds:.0f} s ({info['edit_rate_s']:.1f} files/s), "
        f"{info['git_commits']} git commits, versions {info['version_before']} -> {info['version_after']}; "
        f"daemon CPU {cpu / wall:.2f} cores over the {wall:.0f} s of editing; "
        f"the last write searchable after {fmt_s(info['last_edit_searchable_s'])}"
    )
    log("    by thread: " + by_thread(cores, 8))
    log("    the writer over the editing: " + writer_work_line(work))


# ---------------------------------------------------------------- set-up


def has_admission_keys(ctxd):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("[server]\nmax_queued_queries = 8\n")
        path = f.name
    try:
        r = subprocess.run([ctxd, "config", "validate", path], capture_output=True, text=True, timeout=120)
        return r.returncode == 0
    finally:
        os.unlink(path)


def prepare(args):
    """The watched folder and the index (built once, timed)."""
    if not os.path.isdir(args.src):
        files = sorted(os.listdir(args.corpus))
        if args.files:
            files = files[: args.files]
        os.makedirs(args.src)
        for name in files:
            shutil.copy2(os.path.join(args.corpus, name), os.path.join(args.src, name))
        log(f"copied {len(files)} files of {args.corpus} into {args.src}")
    if not os.path.isdir(os.path.join(args.src, ".git")):
        git(args.src, "init", "-q", "-b", "main")
        git_commit(args.src, "corpus")
        log(f"{args.src} is a git repository (branch main)")
    remove_ingested(args.src)  # leftovers of an interrupted run: the next start-up removes them from the index
    n_src = len([n for n in os.listdir(args.src) if not n.startswith(".")])
    if not os.path.isdir(args.db):
        log(f"indexing {n_src} files: {args.ctxd} index {args.src} --db {args.db}")
        t0 = time.time()
        r = subprocess.run([args.ctxd, "index", "--config", write_config(args, False)], capture_output=True, text=True)
        dt = time.time() - t0
        if r.returncode != 0:
            sys.exit(f"ctxd index failed ({r.returncode}) after {dt:.0f} s:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        log(f"indexed {n_src} files in {dt:.0f} s ({args.profile} build)")
        log(r.stdout.strip()[-1500:])
        with open(os.path.join(WORK, "index-time.txt"), "w") as f:
            f.write(f"{n_src} files {dt:.1f} s {args.profile} {time.ctime()}\n")
    else:
        note = ""
        p = os.path.join(WORK, "index-time.txt")
        if os.path.exists(p):
            note = " (built earlier: " + open(p).read().strip() + ")"
        log(f"reusing index {args.db}{note}; watched folder {args.src}: {n_src} files")
    return n_src


def write_config(args, admission):
    """The configuration: the two sources (see the module docs), the database, `[server]`."""
    path = os.path.join(WORK, "load.toml")
    lines = [
        "[[source]]", 'name = "code"', f'root = "{args.src}"', 'exclude = [".git/**"]', "",
        "[[source]]", 'name = "history"', f'git = "{args.src}"', 'refs = ["main"]',
        f'include = ["{INGEST_PREFIX}*/**"]', "poll_interval_secs = 2", "",
        "[index]", f'db = "{args.db}"', "",
        "[server]",
    ]
    if admission:
        lines += [
            f"max_concurrent_queries = {args.max_concurrent}",
            f"max_queued_queries = {args.max_queued}",
            f"queue_timeout_ms = {args.queue_timeout_ms}",
        ]
    lines += args.config_line or []
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def start_moto():
    moto = os.path.join(HOME, ".cache/ctxd/py-venv/bin/moto_server")
    if not os.path.exists(moto):
        raise RuntimeError(f"{moto} is missing (scripts/test.sh installs moto[server])")
    port = free_port()
    proc = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    import socket

    t0 = time.time()
    while time.time() - t0 < 60:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("moto did not start")


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "ctxd-test",
    "AWS_SECRET_ACCESS_KEY": "ctxd-test-secret",
    "AWS_REGION": "us-east-1",
    "AWS_ALLOW_HTTP": "true",
}

UPLOAD = r"""
import os, sys, boto3
endpoint, bucket, prefix, root = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="ctxd-test",
                  aws_secret_access_key="ctxd-test-secret", region_name="us-east-1")
s3.create_bucket(Bucket=bucket)
n = 0
for d, _, files in os.walk(root):
    for f in files:
        if f == ".ctxd-writer.lock":
            continue
        p = os.path.join(d, f)
        s3.upload_file(p, bucket, prefix + "/" + os.path.relpath(p, root))
        n += 1
print(n)
"""


def readers_scenario(args, queries, config, rows):
    """The index uploaded to moto, 1..N `--role reader`s, the clients spread over them."""
    py = os.path.join(HOME, ".cache/ctxd/py-venv/bin/python3")
    moto, endpoint = start_moto()
    env = dict(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    readers = []
    try:
        t0 = time.time()
        r = subprocess.run([py, "-c", UPLOAD, endpoint, "bench", "index", args.db], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"readers: upload to moto failed:\n{r.stderr[-2000:]}")
            return
        log(f"readers: uploaded {r.stdout.strip()} index files to moto in {time.time() - t0:.0f} s")
        for n in args.readers:
            while len(readers) < n:
                i = len(readers)
                d = Daemon(
                    args.ctxd,
                    ["--role", "reader", "--db", "s3://bench/index", "--config", config],
                    os.path.join(WORK, f"logs/reader{i}-{time.strftime('%H%M%S')}.log"),
                    env_extra=env,
                    name=f"reader{i}",
                )
                readers.append(d)
                log(f"reader{i} ready after {d.wait_ready(args.ready_within):.1f} s")
            for mix in args.mixes:
                rows.append(run_load([d.base for d in readers], queries, mix, args, f"readers{n}", f"r{n}{mix[0]}", readers, helper=moto))
    finally:
        for d in readers:
            rc = d.stop()
            if rc not in (0, None, -15):
                log(f"{d.name} exit {rc}:\n{d.tail()}")
        moto.terminate()
        moto.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--profile", help="build profile of --ctxd, printed with the figures (default: guessed from its path)")
    ap.add_argument("--corpus", default=os.path.join(COSQA, "corpus"))
    ap.add_argument("--queries", default=os.path.join(COSQA, "queries-dev.jsonl"))
    ap.add_argument("--src", default=os.path.join(WORK, "src"))
    ap.add_argument("--db", default=os.path.join(WORK, "db-sources"))
    ap.add_argument("--files", type=int, default=0, help="copy only the first N corpus files (0: all)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--distinct", type=int, default=0, help="use only the first N queries (0: all 500): more repetition for the repeat mix")
    ap.add_argument("--baseline-clients", type=int, default=1, help="before the idle runs, a run with this many clients (0: none)")
    ap.add_argument("--mixes", default="repeat,unique")
    ap.add_argument("--scenarios", default="idle,ingest")
    ap.add_argument("--readers", default="1,2,3")
    ap.add_argument("--ingest-files", type=int, default=300)
    ap.add_argument("--edit-rate", type=float, default=20, help="files written a second while ingesting (0: copy --ingest-files at once)")
    ap.add_argument("--git-commit-secs", type=float, default=10, help="while ingesting, a git commit of the edits this often (0: never)")
    ap.add_argument("--ingest-wait", type=float, default=900, help="seconds from the copy to wait for all ingested files")
    ap.add_argument("--admission", choices=["auto", "on", "off"], default="auto", help="write the admission keys into the config (auto: if `config validate` takes them)")
    ap.add_argument("--max-concurrent", type=int, default=0)
    ap.add_argument("--max-queued", type=int, default=64)
    ap.add_argument("--queue-timeout-ms", type=int, default=2000)
    ap.add_argument("--config-line", action="append", help="another `key = value` line under [server]")
    ap.add_argument("--ignore-retry-after", action="store_true", help="do not wait Retry-After after a 503")
    ap.add_argument("--ready-within", type=float, default=1800)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    args.mixes = [m for m in args.mixes.split(",") if m]
    args.readers = [int(x) for x in args.readers.split(",") if x]
    scenarios = [s for s in args.scenarios.split(",") if s]
    if not args.profile:
        real = os.path.realpath(args.ctxd)
        args.profile = "release" if "/release/" in real else "debug" if "/debug/" in real else "unknown"
    os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)

    with open(args.queries) as f:
        queries = [json.loads(l)["query"] for l in f if l.strip()]
    if args.distinct:
        queries = queries[: args.distinct]
    admission = has_admission_keys(args.ctxd) if args.admission == "auto" else args.admission == "on"
    log(f"ctxd {args.ctxd} ({args.profile} build{' — debug is ~10x slower than release: absolute figures are not release figures' if args.profile != 'release' else ''})")
    log(f"machine: {os.cpu_count()} cores, loadavg {loadavg()}; admission keys in config: {admission}; {len(queries)} queries; retry-after {'ignored' if args.ignore_retry_after else 'honoured'}")
    n_src = prepare(args)
    config = write_config(args, admission)
    log(f"config {config}: " + open(config).read().replace("\n", "; "))
    rows = []
    if any(s in scenarios for s in ("idle", "ingest", "writer")):
        daemon = Daemon(
            args.ctxd,
            ["--config", config],
            os.path.join(WORK, f"logs/serve-{time.strftime('%H%M%S')}.log"),
        )
        log(f"serve: {' '.join(daemon.cmd)}  (log {daemon.log_path})")
        try:
            ready = daemon.wait_ready(args.ready_within)
            log(f"daemon ready after {ready:.1f} s ({n_src} files watched), version {version_of(daemon.base)}")
            time.sleep(2)
            tag = time.strftime("%H%M%S")
            if "idle" in scenarios and args.baseline_clients:
                for mix in args.mixes:
                    if daemon.alive():
                        rows.append(run_load([daemon.base], queries, mix, args, "baseline", f"b{tag}{mix[0]}", [daemon], clients=args.baseline_clients))
            if "idle" in scenarios:
                for mix in args.mixes:
                    if daemon.alive():
                        rows.append(run_load([daemon.base], queries, mix, args, "idle", f"i{tag}{mix[0]}", [daemon]))
            if "writer" in scenarios and daemon.alive():
                writer_scenario(daemon, args, tag)
            if "ingest" in scenarios:
                for j, mix in enumerate(args.mixes):
                    if not daemon.alive():
                        break
                    run_tag = f"g{tag}{mix[0]}"
                    if args.edit_rate > 0:
                        during = edit_side(daemon.base, args.src, args.ingest_files, run_tag, args)
                    else:
                        during = ingest_side(daemon.base, args.src, args.ingest_files, j * args.ingest_files, run_tag, args)
                    rows.append(run_load([daemon.base], queries, mix, args, "ingest", run_tag, [daemon], during=during))
            if "after" in scenarios:
                for mix in args.mixes:
                    if daemon.alive():
                        rows.append(run_load([daemon.base], queries, mix, args, "after", f"a{tag}{mix[0]}", [daemon]))
        except RuntimeError as e:
            log(f"!!! {e}")
        finally:
            remove_ingested(args.src)
            if daemon.alive():
                time.sleep(3)  # let the watcher see the removals before the drain
            rc = daemon.stop()
            log(f"daemon stopped (exit {rc}); log {daemon.log_path}")
            errs = [l for l in daemon.tail(400).splitlines() if " ERROR " in l or "panicked" in l or "WARN" in l]
            if errs:
                log("daemon log warnings/errors (last 15):\n  " + "\n  ".join(errs[-15:]))
    if "readers" in scenarios:
        try:
            readers_scenario(args, queries, config, rows)
        except RuntimeError as e:
            log(f"!!! readers: {e}")

    log(f"\n=== summary ({args.profile} build; {os.cpu_count()} cores shared with the client and other work)")
    log(f"{'scenario':<9} {'mix':<7} {'clients':>7} {'answered':>8} {'QPS':>6} {'p50ms':>6} {'p90ms':>6} {'p99ms':>6} {'503(RA)':>7} {'other':>5} {'hits/miss':>11} {'rejected':<32} {'qwait50':>7} {'loadavg':<16}")
    for r in rows:
        rej = ",".join(f"{k}={v}" for k, v in sorted(r["rejected_by_reason"].items())) or "-"
        log(
            f"{r['scenario']:<9} {r['mix']:<7} {r['clients']:>7} {r['answered']:>8} {r['qps']:>6.1f} {fmt_ms(r['p50_ms']):>6} {fmt_ms(r['p90_ms']):>6} "
            f"{fmt_ms(r['p99_ms']):>6} {r['r503_retry_after']:>7} {r['other_errors'] + r['r503_no_retry_after']:>5} "
            f"{str(r['cache_hits']) + '/' + str(r['cache_misses']):>11} {rej:<32} {fmt_ms(r['queue_wait_p50_ms']):>7} {r['loadavg_before']:<16}"
        )
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"profile": args.profile, "ctxd": args.ctxd, "rows": rows}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
