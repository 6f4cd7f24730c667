"""What a load bench reads of the processes and daemons it measures: CPU seconds and RSS of a
process and CPU seconds per thread name from /proc, the daemon's HTTP answers (JSON posts that
never raise on an HTTP error, its /v1/status version) and its /metrics, parsed into
{(name, labels): value} with the sums, deltas, per-label deltas and histogram quantiles
between two scrapes that `load.py`, `load_trend.py` and `soak.py` print."""
import json, math, os, urllib.error, urllib.request


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def proc_cpu_seconds(pid):
    """utime + stime of a process (and its reaped children), in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return sum(int(x) for x in fields[11:15]) / ticks
    except (OSError, IndexError, ValueError):
        return float("nan")


def thread_cpu_seconds(pid):
    """utime + stime per thread name (digits and dashes at the end dropped: `tokio-runtime-w`,
    `ctxd-embed`, …), in seconds: where a process's CPU goes."""
    ticks, out = os.sysconf("SC_CLK_TCK"), {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
            name = head.split("(", 1)[1].rstrip("0123456789-_#") or "?"
            fields = tail.split()
            out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, IndexError, ValueError):
            pass
    return out


def thread_cores(before, after, wall):
    """CPU cores each thread name used between two `thread_cpu_seconds` readings `wall` s apart."""
    return {k: round((v - before.get(k, 0.0)) / wall, 3) for k, v in after.items() if wall and v - before.get(k, 0.0) > 0}


def by_thread(cores, n):
    """The `n` busiest thread names of `thread_cores`, as one line."""
    top = sorted(((c, k) for k, c in cores.items()), reverse=True)[:n]
    return ", ".join(f"{k} {c:.2f}" for c, k in top) + " (cores)"


def proc_rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# ---------------------------------------------------------------- HTTP helpers


def get(base, path, timeout=10):
    with urllib.request.urlopen(base + path, timeout=timeout) as r:
        return r.status, r.read()


def post_json(base, path, body, timeout=60):
    """(status, json or None, headers) without raising on HTTP errors."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r), r.headers
    except urllib.error.HTTPError as e:
        try:
            payload = json.loads(e.read() or b"null")
        except ValueError:
            payload = None
        return e.code, payload, e.headers


def scrape(base):
    """/metrics as {(name, labels): value}; labels is the raw `{...}` text ('' without)."""
    try:
        _, body = get(base, "/metrics", timeout=30)
    except Exception:
        return {}
    out = {}
    for line in body.decode(errors="replace").splitlines():
        if not line or line.startswith("#"):
            continue
        try:
            key, value = line.rsplit(" ", 1)
            value = float(value)
        except ValueError:
            continue
        if "{" in key:
            name, labels = key.split("{", 1)
            labels = "{" + labels
        else:
            name, labels = key, ""
        out[(name, labels)] = value
    return out


def metric_sum(m, name, label_filter=None):
    return sum(v for (n, l), v in m.items() if n == name and (label_filter is None or label_filter in l))


def label_value(labels, key):
    for part in labels.strip("{}").split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            if k.strip() == key:
                return v.strip().strip('"')
    return None


def delta(before, after, name, label_filter=None):
    return metric_sum(after, name, label_filter) - metric_sum(before, name, label_filter)


def by_label(before, after, name, key):
    """{label value: delta} of a counter with label `key`."""
    out = {}
    for (n, l), v in after.items():
        if n != name:
            continue
        d = v - before.get((n, l), 0.0)
        lv = label_value(l, key) or "?"
        out[lv] = out.get(lv, 0.0) + d
    return {k: int(v) for k, v in out.items() if v}


def histogram_quantile(before, after, name, q):
    """Quantile q of the observations between two scrapes, interpolated inside the bucket
    (Prometheus `histogram_quantile`); None when nothing was observed."""
    buckets = []
    for (n, l), v in after.items():
        if n != name + "_bucket":
            continue
        le = label_value(l, "le")
        if le is None:
            continue
        bound = math.inf if le in ("+Inf", "Inf") else float(le)
        buckets.append((bound, v - before.get((n, l), 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def version_of(base):
    try:
        _, body = get(base, "/v1/status")
        return json.loads(body).get("version")
    except Exception:
        return None
