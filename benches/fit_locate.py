#!/usr/bin/env python3
"""Fits `ctxd locate`'s ranking model (codegraph/src/locate/model.json) on the training issues.

One command, deterministic:

    python3 benches/fit_locate.py --ctxd BIN            # features from train.jsonl, fit, write model.json

1. Features: `benches/localization.py --data train.jsonl --reuse --features 200` with
   CTXD_LOCATE_MODEL=codegraph/src/locate/hand.json (the hand-set weights, `[locate] model = "hand"`), so every refit starts from
   the same rows: each issue's 200 best candidate files with their feature rows (the signals' scores,
   ranks, flags: codegraph/src/locate/features.rs). The graph feature depends on the seeds the model
   picks; it is computed under the bootstrap model. Indexes are built on first use (--work), reused after.
   `--features-json F` skips this step and reads a localization.py report with features.
2. Fit: a linear model, one weight per feature, listwise: for each issue and each gold file among its
   candidates, the softmax of the gold file's score against the issue's non-gold candidates
   (conditional logit), L2-regularised. Newton's method from zero weights (no randomness): the same
   rows give the same weights. A gold file that is not among the candidates teaches nothing (counted).
   The demotion factors of test and doc files (the score times a factor, model.rs) are not fitted by
   gradient: with them fixed the score is linear in the weights (each row scaled by its factor), so
   a few pairs are tried, from none (the flags then act as additive features) to the hand-set ones.
3. The L2 strength and the factor pair are chosen by 5-fold cross-validation over repositories (each
   repository's issues in one fold, folds by sorted name), on the held-out folds' MRR@10 then Acc@5;
   then the model is fitted on all training issues with them. Nothing of dev.jsonl is read.

Prints the cross-validation table, the weights, and the training figures of the fitted model on the
candidates, all and by Loc-Bench category and by what the text gives to read (the re-ranking of step
1's rows: an estimate, the graph feature still from the bootstrap seeds); `benches/localization.py`
with the new binary gives the real train and dev figures.

    python3 benches/fit_locate.py --ctxd BIN [--data train.jsonl] [--work DIR] [--features-json F]
        [--out codegraph/src/locate/model.json] [--candidates 200] [--per-repo N] [--max-repo-mb MB] [--drop f1,f2] [--dry-run]
        [--check-no-history]
"""
import argparse, collections, json, os, subprocess, sys

try:
    import numpy as np
except ImportError:
    sys.exit("fit: numpy is needed (pip install numpy; the venv scripts/test.sh makes, ~/.cache/ctxd/py-venv, has it)")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LAMBDAS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0)
# (test, doc) demotion factors tried: none, milder, the hand-set pair.
FACTORS = ((1.0, 1.0), (0.5, 0.7), (0.3, 0.5))
SEEDS = 10
# The training subset fitted on by default: each repository's 12 issues with the latest base
# commits (163 issues; no repository more than 12, so yt-dlp's 27 do not outweigh the rest), and
# not the four repositories with over 15 MB of Python (diffusers, moto, scipy, jax: their first
# index alone is most of the cost). `--per-repo 0 --max-repo-mb 0` fits on all 238. The rows of
# this subset are committed (benches/rows/).
PER_REPO = 12
MAX_REPO_MB = 15.0
# The hand-set weights (`[locate] model = "hand"`): the bootstrap model every refit's rows come from.
HAND = os.path.join(REPO, "codegraph/src/locate/hand.json")


def feature_names():
    """The feature names, in the order of `Feature::ALL` (read from the source: one list)."""
    src = open(os.path.join(REPO, "codegraph/src/locate/model.rs")).read()
    body = src[src.index("pub fn as_str(self)"):]
    body = body[:body.index("\n    }\n")]
    names = [line.split('"')[1] for line in body.splitlines() if "=> \"" in line]
    assert len(names) >= 10, names
    return names


def collect(args):
    if args.features_json:
        return json.load(open(args.features_json))
    out = os.path.join(args.work, "features.json")
    env = dict(os.environ, CTXD_LOCATE_MODEL=HAND)
    cmd = [sys.executable, os.path.join(HERE, "localization.py"), "--ctxd", args.ctxd, "--data", args.data,
           "--work", args.work, "--reuse", "--features", str(args.candidates), "--json", out]
    if args.per_repo:
        cmd += ["--per-repo", str(args.per_repo)]
    if args.max_repo_mb:
        cmd += ["--max-repo-mb", str(args.max_repo_mb)]
    print("fit: " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, env=env, stdout=sys.stderr)
    return json.load(open(out))


def scaled(data, names, factors):
    """Rows times their demotion factors (test, doc): the score is linear in the weights on these."""
    it, idoc = names.index("test"), names.index("doc")
    out = []
    for repo, x, y, ng in data:
        c = np.power(factors[0], x[:, it]) * np.power(factors[1], x[:, idoc])
        out.append((repo, x * c[:, None], y, ng))
    return out


def feature_matrix(cands, names):
    """One issue's candidate rows as an n x F array, the features in `names` order (absent ones 0)."""
    return np.array([[c["features"].get(n, 0.0) for n in names] for c in cands], dtype=np.float64)


def without_history(x, names):
    """A copy of the rows `x` with the history features at zero (what an index of a plain checkout gives)."""
    x = x.copy()
    x[:, [names.index(n) for n in HISTORY]] = 0.0
    return x


def issues_of(report, names):
    """[(repo, X (n x F), gold mask)] per issue with candidates; and the count without a gold candidate."""
    out, missed = [], 0
    for row in report["runs"]["full"]["issues"]:
        cands = row.get("features") or []
        if not cands:
            missed += 1
            continue
        gold = set(row["gold"])
        x = feature_matrix(cands, names)
        y = np.array([c["path"] in gold for c in cands])
        if not y.any():
            missed += 1
        out.append((row["repo"], x, y, len(gold)))
    return out, missed


def loss_grad_hess(w, data, lam, derivatives=True, center=None):
    """The mean listwise loss (and, with `derivatives`, its gradient and Hessian) at weights w; the L2
    penalty pulls toward `center` (default zero)."""
    f = len(w)
    d = w if center is None else w - center
    loss, grad, hess, n = 0.0, np.zeros(f), np.zeros((f, f)), 0
    for _, x, y, _ in data:
        if not y.any():
            continue
        s = x @ w
        neg = ~y
        for g in np.flatnonzero(y):
            idx = np.concatenate(([g], np.flatnonzero(neg)))
            xs, ss = x[idx], s[idx]
            m = ss.max()
            e = np.exp(ss - m)
            z = e.sum()
            loss += -(ss[0] - m - np.log(z))
            n += 1
            if not derivatives:
                continue
            p = e / z
            mean = p @ xs
            grad += mean - xs[0]
            hess += (xs * p[:, None]).T @ xs - np.outer(mean, mean)
    n = max(n, 1)
    return loss / n + lam * d @ d, grad / n + 2 * lam * d, hess / n + 2 * lam * np.eye(f)


def fit(data, f, lam, steps=50, center=None):
    """Weights minimising the listwise loss at L2 `lam` (toward `center`): Newton's method from zero."""
    w = np.zeros(f)
    for _ in range(steps):
        loss, g, h = loss_grad_hess(w, data, lam, center=center)
        step = np.linalg.solve(h, g)
        t = 1.0
        while t > 1e-4:
            if loss_grad_hess(w - t * step, data, lam, False, center)[0] <= loss - 1e-4 * t * (g @ step):
                break
            t /= 2
        w = w - t * step
        if np.abs(t * step).max() < 1e-7:
            break
    return w


def issue_figures(score, y, ngold):
    """Acc@1/5/10 and MRR@10 of one issue whose candidates (gold mask `y`) are ranked by `score`."""
    ranked_gold = y[np.argsort(-score, kind="stable")]
    found = np.flatnonzero(ranked_gold)
    m = {f"Acc@{k}": float(ranked_gold[:k].sum() == ngold) for k in (1, 5, 10)}
    m["MRR@10"] = 1.0 / (found[0] + 1) if len(found) and found[0] < 10 else 0.0
    return m


def folds_of(data):
    """The 5 cross-validation folds: sets of repositories, by sorted name."""
    repos = sorted({r for r, *_ in data})
    return [set(repos[i::5]) for i in range(5)]


def cross_validate(data, folds, train_and_score, test=None):
    """Mean held-out figures (issue_figures' keys): for each fold, `train_and_score(rows)` is trained
    on `data` outside the fold and returns a scorer of X, applied to the fold's issues of `test`
    (default `data`; the same issues, other rows: e.g. without history)."""
    held = []
    for fold in folds:
        rows = [d for d in (test or data) if d[0] in fold]
        if rows:
            score = train_and_score([d for d in data if d[0] not in fold])
            held += [issue_figures(score(x), y, ngold) for _, x, y, ngold in rows]
    return {k: sum(h[k] for h in held) / len(held) for k in held[0]}


def linear(lam, f):
    """fit_locate's model for cross_validate: the listwise linear fit at L2 `lam`."""
    def train_and_score(train):
        w = fit(train, f, lam)
        return lambda x: x @ w
    return train_and_score


def figures(w, data):
    m = collections.defaultdict(float)
    for _, x, y, ngold in data:
        for k, v in issue_figures(x @ w, y, ngold).items():
            m[k] += v
    n = len(data) or 1
    return {k: v / n for k, v in m.items()}


HISTORY = ("recency", "cochange", "commits", "recency_debug")


def zeroed(data, cols):
    """A copy of the rows with the columns `cols` at zero (what an index without git history gives)."""
    out = []
    for repo, x, y, ng in data:
        x = x.copy()
        x[:, cols] = 0.0
        out.append((repo, x, y, ng))
    return out


def dropped(data, names, drop):
    """`data` with the features named in `drop` (a comma list) at zero; an unknown name exits."""
    drop = [n for n in drop.split(",") if n]
    for n in drop:
        if n not in names:
            sys.exit(f"fit: --drop {n}: not a feature ({', '.join(names)})")
    return zeroed(data, [names.index(n) for n in drop])


def history_check(data, names, folds):
    """Cross-validated figures on rows without history: the model fitted with history (its history
    features then zero) against one fitted without, at each L2 strength (factors none)."""
    cols = [names.index(n) for n in HISTORY]
    print("\n| L2 | queried without history: fitted with it | fitted without it | with history, as fitted |"
          "\n|---|---|---|---|")
    without = zeroed(data, cols)
    for lam in LAMBDAS[:4]:
        cells = []
        for fit_on, test_on in ((data, without), (without, without), (data, data)):
            cv = cross_validate(fit_on, folds, linear(lam, len(names)), test_on)
            cells.append(" / ".join(f"{cv[k]:.3f}" for k in ("Acc@1", "Acc@5", "Acc@10", "MRR@10")))
        print(f"| {lam} | " + " | ".join(cells) + " |")


def by_group(report, data_path, w, fdata):
    """The fitted model's figures on the train candidates by Loc-Bench category and by what the text
    gives to read (localization.py's text_kind): in-sample, so optimistic."""
    from localization import text_kind
    texts = {x["id"]: x["query"] for x in map(json.loads, open(data_path))}
    rows = [r for r in report["runs"]["full"]["issues"] if r.get("features")]
    groups = collections.defaultdict(list)
    for r, d in zip(rows, fdata):
        groups["category: " + (r.get("category") or "none")].append(d)
        groups["text: " + text_kind(texts.get(r["id"], ""))].append(d)
    print("\n| the fitted model on the train candidates, by | n | Acc@1 | Acc@5 | Acc@10 | MRR@10 |\n|---|---|---|---|---|---|")
    for g in sorted(groups):
        m = figures(w, groups[g])
        print(f"| {g} | {len(groups[g])} | {m['Acc@1']:.3f} | {m['Acc@5']:.3f} | {m['Acc@10']:.3f} | {m['MRR@10']:.3f} |")


def model_file(fitted, names, w, factors):
    """A parameter file (codegraph/src/locate/model.rs's form): what it was fitted on, the weights
    (zeros left out) and the test/doc factors other than 1."""
    return {
        "fitted": fitted,
        "seeds": SEEDS,
        "weights": {n: round(float(x), 4) for n, x in zip(names, w) if round(float(x), 4) != 0.0},
        "factors": {n: f for n, f in (("test", factors[0]), ("doc", factors[1])) if f != 1.0},
    }


def write_model(path, model):
    """Writes a parameter file (`model_file`'s dict) as the committed model.json is written."""
    with open(path, "w") as f:
        json.dump(model, f, indent=2)
        f.write("\n")
    print(f"\nwrote {path}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctxd", help="the ctxd binary (needed unless --features-json)")
    ap.add_argument("--data", default="/work/shared/eval/localization/train.jsonl")
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/ctxd/loc-train"))
    ap.add_argument("--features-json", help="a localization.py --features report to fit on")
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--max-repo-mb", type=float, default=MAX_REPO_MB,
                    help="leave out repositories with more indexed MB than this (0: none)")
    ap.add_argument("--per-repo", type=int, default=PER_REPO,
                    help="each repository's N issues with the latest base commits (0: all; indexing every base "
                         "commit of the 238 issues takes hours on 2 cores)")
    ap.add_argument("--out", default=os.path.join(REPO, "codegraph/src/locate/model.json"))
    ap.add_argument("--dry-run", action="store_true", help="print, do not write --out")
    ap.add_argument("--drop", default="", help="features held at zero (a train-side ablation: with --dry-run, "
                    "what the cross-validated figures are without them)")
    ap.add_argument("--check-no-history", action="store_true", help="only print the cross-validated figures "
                    "without the history features: the model fitted with them against one fitted without")
    args = ap.parse_args()
    if "dev" in os.path.basename(args.data):
        sys.exit("fit: refusing to fit on a dev set: fit on train.jsonl, report on dev.jsonl")
    if not args.features_json and not args.ctxd:
        sys.exit("fit: --ctxd BIN is needed to compute the features (or give --features-json)")
    names = feature_names()
    report = collect(args)
    data, missed = issues_of(report, names)
    data = dropped(data, names, args.drop)
    repos = sorted({r for r, *_ in data})
    print(f"fit: {len(data)} issues with candidates on {len(repos)} repositories; "
          f"{missed} without a gold file among the candidates", file=sys.stderr)
    folds = folds_of(data)
    if args.check_no_history:
        history_check(data, names, folds)
        return
    print("\n| L2 | test, doc factors | CV Acc@1 | CV Acc@5 | CV MRR@10 |\n|---|---|---|---|---|")
    best = None
    for factors in FACTORS:
        fdata = scaled(data, names, factors)
        for lam in LAMBDAS:
            cv = cross_validate(fdata, folds, linear(lam, len(names)))
            print(f"| {lam} | {factors[0]}, {factors[1]} | {cv['Acc@1']:.3f} | {cv['Acc@5']:.3f} | {cv['MRR@10']:.3f} |")
            key = (round(cv["MRR@10"], 4), round(cv["Acc@5"], 4))
            if best is None or key > best[0]:
                best = (key, lam, factors, cv)
    _, lam, factors, cv = best
    fdata = scaled(data, names, factors)
    w = fit(fdata, len(names), lam)
    boot = json.load(open(HAND))
    wb = np.array([boot["weights"].get(n, 0.0) for n in names])
    print(f"\nchosen L2 {lam}, test/doc factors {factors}; weights (bootstrap beside):\n")
    print("| feature | fitted | bootstrap |\n|---|---:|---:|")
    for n, x, b in zip(names, w, wb):
        print(f"| {n} | {x:+.4f} | {b:+.2f} |")
    boot_f = boot.get("factors", {})
    tr = figures(w, fdata)
    bt = figures(wb, scaled(data, names, (boot_f.get("test", 1.0), boot_f.get("doc", 1.0))))
    print("\n| on the train candidates | Acc@1 | Acc@5 | Acc@10 | MRR@10 |\n|---|---|---|---|---|")
    for label, m in (("bootstrap", bt), ("fitted", tr)):
        print(f"| {label} | {m['Acc@1']:.3f} | {m['Acc@5']:.3f} | {m['Acc@10']:.3f} | {m['MRR@10']:.3f} |")
    by_group(report, args.data, w, fdata)
    model = model_file((f"benches/fit_locate.py on {os.path.basename(args.data)}: {len(data)} issues, {len(repos)} "
                   f"repositories; listwise softmax over {args.candidates} candidates, L2 {lam} and test/doc factors "
                   f"{factors[0]}/{factors[1]} chosen by 5-fold cross-validation over repositories (CV MRR@10 "
                   f"{cv['MRR@10']:.3f}, Acc@5 {cv['Acc@5']:.3f})"), names, w, factors)
    if args.dry_run:
        print(json.dumps(model, indent=2))
        return
    write_model(args.out, model)


if __name__ == "__main__":
    main()
