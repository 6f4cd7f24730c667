"""Where a load run's tail comes from: `benches/load.py` prints a `tail:` line per run from this.

With 50 clients and a FIFO admission queue a request waits for the ~50 ahead of it, so a run's
p99 is set by its worst dip in throughput, not by single slow questions. This module cuts a run
into 1 s windows by when answers completed and sets the thinnest windows beside what happened in
them:

* the editor's git commits (`git_times`: when `edit_side` committed; the history recording and
  the git source's re-index follow each) — how long before each thin window the last one was,
  and the latency of answers sent within `AFTER_GIT_S` of one against the rest;
* the writer's own work, from `Sampler.series` (the first daemon's /metrics and CPU per thread
  name, every 0.5 s): its commits (`ctxd_index_commits_total`), full-text folds
  (`ctxd_index_fts_updates_total`), fragment merges (the `ctxd_index_fragments` gauge falling: a
  fold's `compact_folded` or a maintenance pass), new versions, LanceDB index cache misses, the
  query side's rebuilds of the path vocabulary (a scan of every path after a new version), and
  the cores of the model's threads (`ctxd-embed`), the writer's (`ctxd-writer`), Lance's pool
  (`lance-cpu`) and the query workers (`tokio-rt-worker`) in each window;
* the query side's own steps (`STEPS`): the mean milliseconds per call of the query's embedding,
  the vector and BM25 searches and the rescoring among the calls that ended in each window
  (`ctxd_query_signal_duration_seconds`, `ctxd_query_rerank_duration_seconds`) — which step a
  thin window's questions spent their extra time in.

From those per-window figures: the mean answers (and steps' milliseconds) of windows with and
without a writer commit, a fragment merge or a fold, and by the table's fragment count at the
window's end, and the correlation of answers per window with each figure over the run (a dip set
by one of them shows as a clearly negative r; noise of ±0.2 is what 25 windows give by chance).

Run alone on saved runs (`python3 benches/load_tail.py RUN.json ...`, files of `load.py
--json-out`) it prints the query steps' milliseconds by scenario, mix and fragment count from each
row's writer samples.
"""
import bisect, math

AFTER_GIT_S = 3.0  # an answer sent this soon after the editor's git commit counts as "after a git commit"
STALL_WINDOW_S = 1.0

# Counters and gauges of the writer read per sample: (key, metric, label filter).
WRITER_METRICS = (
    ("commits", "ctxd_index_commits_total", None),
    ("folds", "ctxd_index_fts_updates_total", None),
    ("version", "ctxd_index_version", None),
    ("fragments", "ctxd_index_fragments", None),
    ("index_misses", "ctxd_index_cache_misses_total", 'cache="index"'),
    ("vocabs", "ctxd_query_vocab_build_duration_seconds_count", None),
)
# The query side's steps, timed per computed search: (key, histogram, label filter); the signals
# of a routed search (`ctxd_query_signal_duration_seconds`) and its rescoring.
STEPS = tuple(
    (s, "ctxd_query_signal_duration_seconds", f'signal="{s}"') for s in ("embed", "vector", "fulltext")
) + (("rescore", "ctxd_query_rerank_duration_seconds", None),)
WRITER_METRICS += tuple(
    (f"{key}_{part}", f"{name}_{part}", f) for key, name, f in STEPS for part in ("sum", "count")
)
# Thread names whose cores are set beside each window (`load_probe.thread_cpu_seconds` names).
THREADS = (("embed", "ctxd-embed"), ("writer", "ctxd-writer"), ("lance", "lance-cpu"), ("queries", "tokio-rt-worker"))


def add_steps(acc, m0, m1):
    """Adds each step's seconds and calls between two samples to `acc` ({step: [seconds, calls]});
    a series sampled before these keys existed has none: the step stays unknown."""
    for key, _, _ in STEPS:
        acc[key][0] += m1.get(f"{key}_sum", 0.0) - m0.get(f"{key}_sum", 0.0)
        acc[key][1] += m1.get(f"{key}_count", 0.0) - m0.get(f"{key}_count", 0.0)


def steps_ms(acc):
    """{`<step>_ms`: mean milliseconds per call} of `add_steps`' sums (None: no call)."""
    return {f"{k}_ms": 1000 * total / n if n else None for k, (total, n) in acc.items()}


def pct(sorted_vals, q):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, math.ceil(q * len(sorted_vals)) - 1))
    return sorted_vals[i]


def pearson(xs, ys):
    """Pearson's r, or None where either side does not vary."""
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def window_figures(series, t, width):
    """What the writer did in [t, t + width): the sample intervals whose end falls there, summed
    (counters' increments, the fragments gauge's falls as merges, threads' CPU seconds / width)."""
    out = {"commits": 0, "folds": 0, "versions": 0, "merges": 0, "index_misses": 0, "vocabs": 0, "fragments_at": None}
    out.update({k: 0.0 for k, _ in THREADS})
    steps = {k: [0.0, 0.0] for k, _, _ in STEPS}
    for (_, m0, c0), (t1, m1, c1) in zip(series, series[1:]):
        if not t <= t1 < t + width:
            continue
        out["commits"] += m1["commits"] - m0["commits"]
        out["folds"] += m1["folds"] - m0["folds"]
        out["versions"] += max(0, m1["version"] - m0["version"])
        out["merges"] += int(m1["fragments"] < m0["fragments"])
        out["fragments_at"] = m1["fragments"]  # the gauge at the window's last sample
        out["index_misses"] += m1["index_misses"] - m0["index_misses"]
        out["vocabs"] += m1["vocabs"] - m0["vocabs"]
        for key, name in THREADS:
            # A thread that ended between the samples takes its seconds with it: never below 0.
            out[key] += max(0.0, c1.get(name, 0.0) - c0.get(name, 0.0)) / width
        add_steps(steps, m0, m1)
    # Mean milliseconds of each step among the calls that ended in the window.
    out.update(steps_ms(steps))
    return out


def step_means(figs):
    """The mean over windows of each step's milliseconds (windows where it ran)."""
    out = {}
    for k, _, _ in STEPS:
        vals = [f[f"{k}_ms"] for f in figs if f[f"{k}_ms"] is not None]
        out[k] = sum(vals) / len(vals) if vals else None
    return out


def tail_causes(timeline, t0, git_times, series=()):
    """The run's thin windows and what happened in them (module doc). `timeline`: `Stats.timeline`
    (its 200s are the answers); `series`: `Sampler.series` ((time, {WRITER_METRICS key: value},
    {thread name: CPU s}) per sample), may be empty. Empty without answers."""
    answers = [(sent, dt) for sent, dt, status in timeline if status == 200]
    done = sorted(sent + dt for sent, dt in answers)
    if not done:
        return {}
    git_times = sorted(git_times)

    def since_git(t):
        i = bisect.bisect_right(git_times, t)
        return None if i == 0 else t - git_times[i - 1]

    first, last = t0 + 2 * STALL_WINDOW_S, done[-1] - STALL_WINDOW_S
    windows = []
    t = first
    while t + STALL_WINDOW_S <= last:
        n = bisect.bisect_left(done, t + STALL_WINDOW_S) - bisect.bisect_left(done, t)
        windows.append((n, t, window_figures(series, t, STALL_WINDOW_S) if len(series) > 1 else None))
        t += STALL_WINDOW_S
    if not windows:
        return {}
    median = sorted(n for n, _, _ in windows)[len(windows) // 2]
    worst = []
    for n, t, fig in sorted(windows, key=lambda w: (w[0], w[1]))[:3]:
        g = since_git(t)
        worst.append({"at_s": round(t - t0, 1), "answers": n, "since_git_s": None if g is None else round(g, 1), "writer": fig})
    after, other = [], []
    for sent, dt in answers:
        g = since_git(sent)
        (after if g is not None and g < AFTER_GIT_S else other).append(dt)
    after.sort()
    other.sort()
    out = {
        "median_window_answers": median,
        "worst_windows": worst,
        "after_git": {"n": len(after), "p50_ms": pct(after, 0.5) * 1000, "p99_ms": pct(after, 0.99) * 1000},
        "other": {"n": len(other), "p50_ms": pct(other, 0.5) * 1000, "p99_ms": pct(other, 0.99) * 1000},
    }
    figured = [(n, fig) for n, _, fig in windows if fig is not None]
    if figured:
        ns = [n for n, _ in figured]
        keys = ["commits", "folds", "merges", "index_misses", "vocabs"] + [k for k, _ in THREADS]
        out["r"] = {k: pearson([fig[k] for _, fig in figured], ns) for k in keys}
        for k, _, _ in STEPS:
            pairs = [(f[f"{k}_ms"], n) for n, f in figured if f[f"{k}_ms"] is not None]
            out["r"][f"{k}_ms"] = pearson([x for x, _ in pairs], [n for _, n in pairs])
        for event in ("commits", "merges", "folds"):
            with_ = [(n, f) for n, f in figured if f[event]]
            without = [(n, f) for n, f in figured if not f[event]]
            out[f"with_{event}"] = {
                "windows": len(with_),
                "mean_answers": sum(n for n, _ in with_) / len(with_) if with_ else None,
                "without_mean_answers": sum(n for n, _ in without) / len(without) if without else None,
                "steps_ms": step_means([f for _, f in with_]),
                "without_steps_ms": step_means([f for _, f in without]),
            }
        by_frag = {}
        for n, f in figured:
            if f["fragments_at"] is not None:
                by_frag.setdefault(int(f["fragments_at"]), []).append((n, f))
        out["by_fragments"] = {
            k: {"windows": len(v), "mean_answers": sum(n for n, _ in v) / len(v), "steps_ms": step_means([f for _, f in v])}
            for k, v in sorted(by_frag.items())
        }
        out["writer_per_window"] = {k: sum(fig[k] for _, fig in figured) / len(figured) for k in keys}
        out["fragments"] = [series[0][1]["fragments"], series[-1][1]["fragments"]]
    return out


def _num(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def tail_lines(tail):
    """The `tail:` lines of a run (none for an empty tail)."""
    if not tail:
        return []

    def one(w):
        where = "no git commit before" if w["since_git_s"] is None else "%.1f s after a git commit" % w["since_git_s"]
        fig = w.get("writer")
        if fig:
            where += "; ms per call " + " ".join(f"{k} {_num(fig[k + '_ms'], 0)}" for k, _, _ in STEPS)
            where += (
                f"; writer {fig['commits']:.0f} commits, {fig['folds']:.0f} folds, {fig['merges']} merges, {fig['vocabs']:.0f} vocabulary rebuilds, "
                f"cores embed {fig['embed']:.2f} writer {fig['writer']:.2f} lance {fig['lance']:.2f} queries {fig['queries']:.2f}"
            )
        return f"{w['answers']} at {w['at_s']} s ({where})"

    a, o = tail["after_git"], tail["other"]
    lines = [
        f"  tail: answers per {STALL_WINDOW_S:g} s window median {tail['median_window_answers']}, fewest "
        + ", ".join(one(w) for w in tail["worst_windows"])
        + f"; sent within {AFTER_GIT_S:g} s after a git commit: n {a['n']} p50 {a['p50_ms']:.0f} p99 {a['p99_ms']:.0f} ms, "
        f"other: n {o['n']} p50 {o['p50_ms']:.0f} p99 {o['p99_ms']:.0f} ms"
    ]
    if "r" in tail:
        per = tail["writer_per_window"]
        c, m, f = tail["with_commits"], tail["with_merges"], tail["with_folds"]
        lines.append(
            f"  tail vs writer: fragments {tail['fragments'][0]:.0f} -> {tail['fragments'][1]:.0f}; per window "
            + ", ".join(f"{k} {per[k]:.2f}" for k in per)
            + f"; windows with a merge {m['windows']} (mean answers {_num(m['mean_answers'], 1)} vs {_num(m['without_mean_answers'], 1)}), "
            f"with a fold {f['windows']} ({_num(f['mean_answers'], 1)} vs {_num(f['without_mean_answers'], 1)}); "
            "r(answers, x): " + ", ".join(f"{k} {_num(v)}" for k, v in tail["r"].items())
        )

        def steps(ms):
            return " ".join(f"{k} {_num(v, 0)}" for k, v in ms.items())

        lines.append(
            f"  tail vs steps: windows with a writer commit {c['windows']} (mean answers {_num(c['mean_answers'], 1)} vs "
            f"{_num(c['without_mean_answers'], 1)}); ms per call with a commit: {steps(c['steps_ms'])}; "
            f"without: {steps(c['without_steps_ms'])}"
        )
        lines.append(
            "  tail by fragments: "
            + "; ".join(
                f"{k}: {g['windows']} windows, mean answers {g['mean_answers']:.1f}, ms per call {steps(g['steps_ms'])}"
                for k, g in tail["by_fragments"].items()
            )
        )
    return lines


def steps_by_fragments(rows):
    """From a saved run (`load.py --json-out FILE`: each row's `writer_samples`, (seconds since the
    run began, metrics) pairs), the searches per second, each step's milliseconds per call and the
    seconds of the run it was seen in, by scenario, mix and the table's fragment count at each
    sample interval's end — the rule of `tail_causes` (its windows also skip a run's first
    2 windows)."""
    groups = {}
    for row in rows:
        samples = row.get("writer_samples") or []
        for (t0, a), (t1, b) in zip(samples, samples[1:]):
            if t1 < 2 * STALL_WINDOW_S or "vector_count" not in b:
                continue
            key = (row["scenario"], row["mix"], int(b["fragments"]))
            g = groups.setdefault(key, {"s": 0.0, "first_s": t0, "last_s": t1, "steps": {k: [0.0, 0.0] for k, _, _ in STEPS}})
            g["s"] += t1 - t0
            g["first_s"], g["last_s"] = min(g["first_s"], t0), max(g["last_s"], t1)
            add_steps(g["steps"], a, b)
    return {
        key: {"searches_per_s": g["steps"]["vector"][1] / g["s"], "first_s": g["first_s"], "last_s": g["last_s"], **steps_ms(g["steps"])}
        for key, g in sorted(groups.items())
    }


if __name__ == "__main__":
    import json, sys

    if len(sys.argv) < 2:
        sys.exit("usage: python3 benches/load_tail.py RUN.json [RUN.json ...]  (files written by load.py --json-out)")
    rows = [r for path in sys.argv[1:] for r in json.load(open(path))["rows"]]
    for (scenario, mix, frags), g in steps_by_fragments(rows).items():
        steps = " ".join(f"{k} {_num(g[k + '_ms'], 1)}" for k, _, _ in STEPS)
        print(
            f"{scenario:7} {mix:7} fragments {frags}: {g['searches_per_s']:.1f} searches/s, ms per call {steps} "
            f"(seen {g['first_s']:.1f}-{g['last_s']:.1f} s)"
        )
