#!/usr/bin/env python3
"""Would a tree ensemble rank `ctxd locate`'s candidates better than the linear model? A measurement.

`benches/fit_locate.py` fits one weight per feature (listwise softmax, L2). The obvious alternative is
LambdaMART (gradient-boosted regression trees with a ranking objective, here LightGBM's `lambdarank`),
which can learn interactions (a `definitions` score that matters only in deep files, a `test` flag that
matters only when the text names no test). This script compares the two on the same training rows and
the same 5-fold cross-validation over repositories as fit_locate.py, over a small grid of tree settings
(leaves, learning rate, rounds, minimum issues' candidates per leaf), and prints the cross-validated
Acc@1 / Acc@5 / MRR@10 of each. Nothing of dev.jsonl is read; nothing is written.

    python3 benches/fit_locate_trees.py --features-json ROWS [--drop f1,f2]

ROWS is a `benches/localization.py --features 200 --json` report on train.jsonl (fit_locate.py's step
1). Needs numpy and lightgbm (`pip install lightgbm`); the ctxd binary itself evaluates only linear models,
so a tree result here is a question for the next model format, not a change in ranking.
"""
import argparse, itertools, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fit_locate as fl  # noqa: E402  (numpy is checked there)
import numpy as np  # noqa: E402

try:
    import lightgbm as lgb
except ImportError:
    sys.exit("fit_locate_trees: lightgbm is needed (pip install lightgbm)")

LEAVES = (3, 7)
RATES = (0.05, 0.1)
ROUNDS = (50, 200)
MIN_LEAF = (20, 100)


def trees(leaves, rate, rounds, min_leaf):
    params = dict(objective="lambdarank", num_leaves=leaves, learning_rate=rate, min_data_in_leaf=min_leaf,
                  feature_fraction=0.8, lambdarank_truncation_level=20, verbosity=-1, deterministic=True,
                  seed=1, num_threads=1)

    def train_and_score(train):
        train = [d for d in train if d[2].any()]
        ds = lgb.Dataset(np.vstack([d[1] for d in train]), np.concatenate([d[2].astype(int) for d in train]),
                         group=[len(d[2]) for d in train])
        booster = lgb.train(params, ds, rounds)
        return booster.predict
    return train_and_score


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features-json", required=True, help="a localization.py --features report on train.jsonl")
    ap.add_argument("--drop", default="", help="features held at zero in both models")
    args = ap.parse_args()
    names = fl.feature_names()
    if "dev" in os.path.basename(args.features_json):
        sys.exit("fit_locate_trees: refusing a dev report: compare on train rows")
    report = json.load(open(args.features_json))
    data, missed = fl.issues_of(report, names)
    data = fl.dropped(data, names, args.drop)
    folds = fl.folds_of(data)
    print(f"{len(data)} issues on {len(set().union(*folds))} repositories ({missed} without a gold candidate); "
          "5-fold cross-validation over repositories\n")
    print("| model | settings | CV Acc@1 | CV Acc@5 | CV MRR@10 |\n|---|---|---|---|---|")
    for lam in (0.001, 0.01, 0.1):
        cv = fl.cross_validate(data, folds, fl.linear(lam, len(names)))
        print(f"| linear (fit_locate.py) | L2 {lam} | {cv['Acc@1']:.3f} | {cv['Acc@5']:.3f} | {cv['MRR@10']:.3f} |",
              flush=True)
    for leaves, rate, rounds, min_leaf in itertools.product(LEAVES, RATES, ROUNDS, MIN_LEAF):
        cv = fl.cross_validate(data, folds, trees(leaves, rate, rounds, min_leaf))
        print(f"| LambdaMART | {leaves} leaves, rate {rate}, {rounds} rounds, ≥ {min_leaf} per leaf | "
              f"{cv['Acc@1']:.3f} | {cv['Acc@5']:.3f} | {cv['MRR@10']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
