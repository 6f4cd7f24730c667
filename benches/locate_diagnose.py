#!/usr/bin/env python3
"""Why a fitted `locate` model holds or fails across kinds of issue: train (cross-validated) and dev
figures by category and by text kind, for the hand-set weights, the committed fit and each fitting
recipe; how stable each recipe's weights are across folds; which dev issues a model wins or loses
against the hand-set weights. Chooses a recipe on train only and can write it as the fitted model.

    python3 benches/locate_diagnose.py --train ROWS [--dev ROWS] [--write codegraph/src/locate/model.json]

ROWS: a `benches/localization.py --features 200 --json ROWS` report made under the hand-set weights
(`fit_locate.py`'s step 1; CTXD_LOCATE_MODEL=codegraph/src/locate/hand.json), so every model and
recipe re-ranks the same candidates (the graph feature stays the one of the hand-set seeds: an
estimate; `localization.py --reuse` with the written model gives the binary's figures).

Every figure is given twice: on the rows as indexed (git history: recency, co-change, commits) and
on the same rows with the history features at zero — what an index of a plain checkout gives, as the
held-out sets are run.

Recipes (each a listwise fit, fit_locate.py's objective; L2 strength chosen per recipe by
cross-validation):
- `l2`: fit_locate.py's recipe (every feature free, flags additive);
- `nohist`: the same fitted on rows without history;
- `prior`: the L2 penalty pulls toward the hand-set weights instead of zero, rows scaled by the
  hand-set test/doc factors (the fit moves away from the hand weights only where the data insist);
- `mono`: the signals' weights held ≥ 0 (a signal that finds a file never counts against it:
  features whose fitted weight comes out negative are held at zero and the rest refitted, until none
  is); the flags and file-shape features (test, doc, init, depth, size) stay free;
- `mono-prior`, `mono-nohist`, `mono-prior-nohist`: the combinations.

Choice (train only): cross-validated twice — 5 folds by repository and, separately, one fold per
Loc-Bench category — on rows without history; a recipe qualifies when in neither no category and no
text kind is worse than the hand-set weights by more than one issue at Acc@1 or Acc@5; among those,
the best mean MRR@10 of the two cross-validations (then Acc@5). dev.jsonl is only reported.
"""
import argparse, collections, json, os, sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fit_locate as fl  # noqa: E402
from localization import text_kind  # noqa: E402

REPO = fl.REPO
LAMBDAS = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
# Features that are a signal's evidence for a file (held >= 0 by the monotone recipes); the rest
# (test, doc, init, depth, size) describe the file and may count against it.
SHAPE = ("test", "doc", "init", "depth", "size")
DEPTHS = (("1", 1), ("2-5", 5), ("6-10", 10), ("11-20", 20), ("21-50", 50), ("51+", float("inf")))
RECIPES = ("l2", "nohist", "prior", "mono", "mono-prior", "mono-nohist", "mono-prior-nohist")


class Issue:
    """One issue's candidates: the rows (as indexed and without history), the gold mask and its groups."""

    def __init__(self, row, names, text):
        self.id, self.repo = row["id"], row["repo"]
        cands = row["features"]
        self.x = fl.feature_matrix(cands, names)
        gold = set(row["gold"])
        self.y = np.array([c["path"] in gold for c in cands])
        self.ngold = len(gold)
        self.x0 = fl.without_history(self.x, names)
        self.category = row.get("category") or ("SWE-bench" if "swe" in row.get("source", "swe") else "none")
        self.kind = text_kind(text)


def load(paths, data_path, names):
    """The issues of one or more ROWS reports (comma-separated paths); where two hold the same issue,
    the later one's rows replace the earlier's (e.g. full-checkout rows over Python-only ones)."""
    rows = {}
    for path in paths.split(","):
        rows.update((r["id"], r) for r in json.load(open(path))["runs"]["full"]["issues"])
    texts = {x["id"]: x for x in map(json.loads, open(data_path))}
    out, missed = [], 0
    for row in rows.values():
        if not row.get("features"):
            missed += 1
            continue
        row = dict(row, source=texts.get(row["id"], {}).get("source", ""))
        out.append(Issue(row, names, texts.get(row["id"], {}).get("query", "")))
    return out, missed


def weights_of(path, names):
    m = json.load(open(path))
    w = np.array([m["weights"].get(n, 0.0) for n in names])
    f = m.get("factors", {})
    return w, (f.get("test", 1.0), f.get("doc", 1.0))


class Scorer:
    """A linear model: weights and the test/doc factors; scores one issue's rows."""

    def __init__(self, w, factors, names):
        self.w, self.factors = w, factors
        self.it, self.idoc = names.index("test"), names.index("doc")

    def __call__(self, x):
        c = np.power(self.factors[0], x[:, self.it]) * np.power(self.factors[1], x[:, self.idoc])
        return (x @ self.w) * c


def fit_recipe(recipe, issues, names, lam, hand):
    """The recipe's weights fitted on `issues` at L2 `lam` (a Scorer)."""
    w_hand, f_hand = hand
    parts = recipe.split("-")
    factors = f_hand if "prior" in parts else (1.0, 1.0)
    rows = [(i.repo, i.x0 if "nohist" in parts else i.x, i.y, i.ngold) for i in issues]
    if "nohist" in parts:  # the history columns carry nothing: keep them out of the fit
        hist = [names.index(n) for n in fl.HISTORY]
    else:
        hist = []
    rows = fl.scaled(rows, names, factors)
    center = w_hand if "prior" in parts else np.zeros(len(names))
    fixed = set(hist)
    while True:
        free = [j for j in range(len(names)) if j not in fixed]
        w = np.zeros(len(names))
        sub = [(r, x[:, free], y, g) for r, x, y, g in rows]
        w[free] = fl.fit(sub, len(free), lam, center=center[free])
        neg = [j for j in free if "mono" in parts and names[j] not in SHAPE and w[j] < 0]
        if not neg:
            return Scorer(w, factors, names)
        fixed.update(neg)


def per_issue(scorer, issues, history):
    return {i.id: fl.issue_figures(scorer(i.x if history else i.x0), i.y, i.ngold) for i in issues}


def cross_validated(recipe, issues, names, lam, hand, folds, history, fit=fit_recipe):
    """Per-issue held-out figures: each fold's issues scored by the recipe fitted (by `fit`, which
    takes fit_recipe's arguments) outside the fold."""
    out = {}
    for fold in folds:
        test = [i for i in issues if fold(i)]
        if test:
            out.update(per_issue(fit(recipe, [i for i in issues if not fold(i)], names, lam, hand), test, history))
    return out


def repo_folds(issues):
    repos = sorted({i.repo for i in issues})
    return [(lambda i, s=set(repos[k::5]): i.repo in s) for k in range(5)]


def category_folds(issues):
    return [(lambda i, c=c: i.category == c) for c in sorted({i.category for i in issues})]


def groups(issues):
    g = collections.defaultdict(list)
    for i in issues:
        g["all"].append(i.id)
        g[i.category].append(i.id)
        g[i.kind].append(i.id)
    return g


def mean(figs, ids, key):
    return sum(figs[i][key] for i in ids) / max(len(ids), 1)


def worst_loss(figs, base, issues):
    """The most issues any group (category, text kind) loses against `base` at Acc@1 or Acc@5."""
    worst = 0.0
    for name, ids in groups(issues).items():
        for k in ("Acc@1", "Acc@5"):
            worst = max(worst, sum(base[i][k] - figs[i][k] for i in ids))
    return worst


def table(title, rows, issues):
    gs = groups(issues)
    cols = ["all"] + sorted(k for k in gs if k != "all")
    print(f"\n{title}: Acc@1 / Acc@5 / MRR@10 (n)\n")
    print("| model | " + " | ".join(f"{c} ({len(gs[c])})" for c in cols) + " | worst loss vs hand |")
    print("|---|" + "---|" * (len(cols) + 1))
    base = rows[0][1]
    for label, figs in rows:
        cells = [" / ".join(f"{mean(figs, gs[c], k):.3f}" for k in ("Acc@1", "Acc@5", "MRR@10")) for c in cols]
        print(f"| {label} | " + " | ".join(cells) + f" | {worst_loss(figs, base, issues):.0f} |")


def judged(recipe, issues, names, lam, hand, base, fit=fit_recipe):
    """The recipe's per-issue figures cross-validated by repository and by category (rows without
    history), and the most issues any category or text kind of either loses against `base`."""
    rf = cross_validated(recipe, issues, names, lam, hand, repo_folds(issues), False, fit)
    cf = cross_validated(recipe, issues, names, lam, hand, category_folds(issues), False, fit)
    return rf, cf, max(worst_loss(rf, base, issues), worst_loss(cf, base, issues))


def choose(issues, names, hand):
    """(recipe, lam, summary per candidate) chosen by the two cross-validations, rows without history."""
    base_rf = per_issue(Scorer(*hand, names), issues, False)
    results = []
    for recipe in RECIPES:
        for lam in LAMBDAS:
            rf, cf, loss = judged(recipe, issues, names, lam, hand, base_rf)
            ids = [i.id for i in issues]
            mrr = (mean(rf, ids, "MRR@10") + mean(cf, ids, "MRR@10")) / 2
            acc5 = (mean(rf, ids, "Acc@5") + mean(cf, ids, "Acc@5")) / 2
            results.append((recipe, lam, loss, mrr, acc5, rf, cf))
            print(f"| {recipe} | {lam} | {mean(rf, ids, 'Acc@1'):.3f} / {mean(rf, ids, 'Acc@5'):.3f} / "
                  f"{mean(rf, ids, 'MRR@10'):.3f} | {mean(cf, ids, 'Acc@1'):.3f} / {mean(cf, ids, 'Acc@5'):.3f} / "
                  f"{mean(cf, ids, 'MRR@10'):.3f} | {loss:.0f} |", flush=True)
    ok = [r for r in results if r[2] <= 1] or results
    best = max(ok, key=lambda r: (round(r[3], 4), round(r[4], 4), -r[2]))
    return best, results


def stability(recipe, lam, issues, names, hand):
    """The recipe's weights fitted without each fold (by repository, by category): mean, sd, sign flips."""
    ws = []
    for folds in (repo_folds(issues), category_folds(issues)):
        for fold in folds:
            ws.append(fit_recipe(recipe, [i for i in issues if not fold(i)], names, lam, hand).w)
    ws = np.array(ws)
    full = fit_recipe(recipe, issues, names, lam, hand).w
    print(f"\nweights of `{recipe}` at L2 {lam} fitted without each of {len(ws)} folds (5 by repository, then one per "
          "category):\n\n| feature | all | hand | mean | sd | min | max | sign flips |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for j, n in enumerate(names):
        col = ws[:, j]
        flips = int(min((col > 1e-6).sum(), (col < -1e-6).sum()))
        print(f"| {n} | {full[j]:+.3f} | {hand[0][j]:+.2f} | {col.mean():+.3f} | {col.std():.3f} | {col.min():+.3f} | "
              f"{col.max():+.3f} | {flips} |")


def depth(label, scorer, issues):
    """Where each issue's last gold file sits under `scorer` (rows without history): what a re-weighting
    can still reach (ranks 6-20) against what needs new evidence (deeper, or not a candidate at all)."""
    buckets = collections.Counter()
    for i in issues:
        if i.y.sum() < i.ngold:
            buckets["not a candidate"] += 1
            continue
        last = np.flatnonzero(i.y[np.argsort(-scorer(i.x0), kind="stable")]).max() + 1
        buckets[next(b for b, top in DEPTHS if last <= top)] += 1
    print(f"\n{label}, rank of the last gold file ({len(issues)} issues): "
          + ", ".join(f"{b}: {buckets[b]}" for b in [b for b, _ in DEPTHS] + ["not a candidate"]))


def changes(label, figs, base, issues):
    """The issues whose Acc@1 or Acc@5 differ from the hand-set weights'."""
    moved = [(i, figs[i.id], base[i.id]) for i in issues
             if (figs[i.id]["Acc@1"], figs[i.id]["Acc@5"]) != (base[i.id]["Acc@1"], base[i.id]["Acc@5"])]
    print(f"\n{label} against the hand-set weights ({len(moved)} issues move):")
    for i, f, b in moved:
        sign = "+" if (f["Acc@1"], f["Acc@5"]) > (b["Acc@1"], b["Acc@5"]) else "-"
        print(f"  {sign} {i.id} ({i.category}, {i.kind}): Acc@1 {b['Acc@1']:.0f}->{f['Acc@1']:.0f}, "
              f"Acc@5 {b['Acc@5']:.0f}->{f['Acc@5']:.0f}, MRR {b['MRR@10']:.2f}->{f['MRR@10']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True, help="localization.py --features report on train.jsonl (hand-set "
                    "weights); several, comma-separated: a later one's issues replace an earlier one's")
    ap.add_argument("--train-data", default="/work/shared/eval/localization/train.jsonl")
    ap.add_argument("--dev", help="the same report(s) on dev.jsonl: reported, never fitted on or chosen by")
    ap.add_argument("--dev-data", default="/work/shared/eval/localization/dev.jsonl")
    ap.add_argument("--write", help="write the chosen recipe, fitted on all train issues, as a model file here")
    args = ap.parse_args()
    names = fl.feature_names()
    hand = weights_of(os.path.join(REPO, "codegraph/src/locate/hand.json"), names)
    committed = weights_of(os.path.join(REPO, "codegraph/src/locate/model.json"), names)
    train, missed = load(args.train, args.train_data, names)
    print(f"train: {len(train)} issues with candidates on {len({i.repo for i in train})} repositories "
          f"({missed} without)", flush=True)
    hand_s, committed_s = Scorer(*hand, names), Scorer(*committed, names)
    for history in (True, False):
        what = "as indexed (history)" if history else "without history (a plain checkout)"
        l2 = cross_validated("l2", train, names, 0.003, hand, repo_folds(train), history)
        table(f"train, {what}", [("hand", per_issue(hand_s, train, history)),
                                 ("committed fit (in-sample where its rows are these)", per_issue(committed_s, train, history)),
                                 ("l2 at 0.003 (the committed recipe), CV by repository", l2)], train)
    print("\nchoice on train, rows without history: | recipe | L2 | CV by repository | CV by category | "
          "worst loss vs hand |\n|---|---|---|---|---|")
    best, _ = choose(train, names, hand)
    recipe, lam = best[0], best[1]
    print(f"\nchosen: {recipe} at L2 {lam} (worst loss vs hand {best[2]:.0f} issues; mean CV MRR@10 {best[3]:.3f}, "
          f"Acc@5 {best[4]:.3f})")
    base = per_issue(hand_s, train, False)
    table("train without history, cross-validated", [("hand", base), ("l2 0.003, CV by repository",
          cross_validated("l2", train, names, 0.003, hand, repo_folds(train), False)),
          (f"{recipe} {lam}, CV by repository", best[5]), (f"{recipe} {lam}, CV by category", best[6])], train)
    stability("l2", 0.003, train, names, hand)
    if (recipe, lam) != ("l2", 0.003):
        stability(recipe, lam, train, names, hand)
    chosen = fit_recipe(recipe, train, names, lam, hand)
    depth(f"train, chosen {recipe} {lam} (in-sample)", chosen, train)
    if args.dev:
        dev, dmissed = load(args.dev, args.dev_data, names)
        print(f"\ndev: {len(dev)} issues with candidates ({dmissed} without)")
        for history in (True, False):
            rows = [("hand", per_issue(hand_s, dev, history)), ("committed fit", per_issue(committed_s, dev, history)),
                    (f"chosen: {recipe} {lam}", per_issue(chosen, dev, history))]
            table("dev, " + ("as indexed (history)" if history else "without history"), rows, dev)
            for label, figs in rows[1:]:
                changes(f"dev {'with' if history else 'without'} history, {label}", figs, rows[0][1], dev)
        depth(f"dev, chosen {recipe} {lam}", chosen, dev)
    if args.write:
        fitted = (f"benches/locate_diagnose.py on train.jsonl: {len(train)} issues, "
                  f"{len({i.repo for i in train})} repositories; recipe {recipe} at L2 {lam}, chosen by "
                  f"cross-validation by repository and by category on rows without history (mean CV MRR@10 "
                  f"{best[3]:.3f}, Acc@5 {best[4]:.3f}; no category or text kind more than {best[2]:.0f} "
                  f"issue(s) below the hand-set weights)")
        fl.write_model(args.write, fl.model_file(fitted, names, chosen.w, chosen.factors))


if __name__ == "__main__":
    main()
