#!/usr/bin/env python3
"""Would more features of the same candidates help the linear `locate` model? A measurement.

Adds candidate features computed from what the committed feature rows already hold (each
candidate's path and signal scores, and the issue's text), then cross-validates the chosen recipe
of `benches/locate_diagnose.py` on train.jsonl with and without them (5 folds by repository and
one fold per Loc-Bench category, rows without history, as locate_diagnose chooses). Nothing of
dev.jsonl is read; nothing is written but the augmented rows' temporary copy.

Feature families (`--family`):
- `path`: the words of the file's name (split at `_`, `-`, `.` and camelCase; under three letters
  and generic words such as `utils`, `base`, `core` left out) that the issue's text uses, as a
  share of them (`stem_share`); 1 when the whole file name is a word of the text (`stem_whole`); the
  same share for the folder names on its path (`dir_share`);
- `rank`: each signal's 1/(1 + rank) among the issue's candidates (where the rows have no rank of
  it yet);
- `norm`: each signal divided by its best candidate's value in the issue;
- `sibling`: 1 when the file sits in the folder of one of the issue's three best candidates under the
  hand-set weights (a second stage: the neighbours of what the first ranking found), 0 for the best.

`--bag B` also scores the recipe bagged: its weights averaged over B fits on bootstrap samples of the
training repositories (steadier weights, the usual remedy for a fit that does not hold out of sample).

    python3 benches/locate_extra_features.py --train ROWS [--family path,rank,norm,sibling] [--recipe mono-prior-nohist] [--bag 16]

ROWS: `benches/rows/locate-train-hand.json` (decompressed), as for locate_diagnose.py.
"""
import argparse, json, os, re, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fit_locate as fl  # noqa: E402  (numpy is checked there)
import locate_diagnose as ld  # noqa: E402
import numpy as np  # noqa: E402

SIGNALS = ("paths", "frames", "symbols", "messages", "bm25", "vector", "graph", "definitions")
GENERIC = {"init", "py", "test", "tests", "main", "core", "base", "utils", "util", "common", "src", "lib",
           "the", "and", "for"}


def words(s):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return [w for w in re.split(r"[^A-Za-z0-9]+", s.lower()) if len(w) >= 3 and not w.isdigit()]


def path_features(path, text_words):
    parts = path.split("/")
    stem = parts[-1].rsplit(".", 1)[0]
    own = [w for w in words(stem) if w not in GENERIC]
    dirs = [w for d in parts[:-1] for w in words(d) if w not in GENERIC]
    share = lambda ws: sum(w in text_words for w in ws) / len(ws) if ws else 0.0  # noqa: E731
    whole = stem.lower() in text_words and stem.lower() not in GENERIC
    return {"stem_share": share(own), "stem_whole": float(whole), "dir_share": share(dirs)}


def sibling(cands, hand, names, top=3):
    """1 for a candidate in the folder of one of the `top` best candidates under the hand-set weights
    (the best one itself excepted)."""
    x = fl.without_history(fl.feature_matrix(cands, names), names)
    best = np.argsort(-ld.Scorer(*hand, names)(x), kind="stable")[:top]
    folders = {os.path.dirname(cands[j]["path"]) for j in best}
    return [0.0 if j == best[0] else float(os.path.dirname(c["path"]) in folders) for j, c in enumerate(cands)]


def within_issue(cands, family, have):
    """{feature: values over `cands`} of a signal family computed within one issue."""
    out = {}
    for s in SIGNALS:
        xs = np.array([c["features"].get(s, 0.0) for c in cands])
        if family == "rank" and f"{s}_rank" not in have:
            r = np.zeros(len(xs))
            for k, j in enumerate(sorted(range(len(xs)), key=lambda j: (-xs[j], j))):
                r[j] = 1.0 / (1 + k) if xs[j] > 0 else 0.0
            out[f"{s}_rank"] = r
        elif family == "norm":
            top = xs.max() if len(xs) else 0.0
            out[f"{s}_norm"] = xs / top if top > 0 else xs
    return out


def augment(rows_path, data_path, families, have, hand):
    """The rows with the families' features added (a temporary file) and the added names."""
    report = json.load(open(rows_path))
    texts = {x["id"]: x.get("query", "") for x in map(json.loads, open(data_path))}
    added = []
    for row in report["runs"]["full"]["issues"]:
        cands = row.get("features") or []
        text_words = set(words(texts.get(row["id"], ""))) | set(re.split(r"[^a-z0-9_]+", texts.get(row["id"], "").lower()))
        for family in families:
            if family == "path":
                for c in cands:
                    c["features"].update(path_features(c["path"], text_words))
            elif family == "sibling" and cands:
                for c, v in zip(cands, sibling(cands, hand, fl.feature_names())):
                    c["features"]["sibling"] = v
            else:
                for name, vals in within_issue(cands, family, have).items():
                    for c, v in zip(cands, vals):
                        c["features"][name] = float(v)
        for c in cands:
            added += [n for n in c["features"] if n not in have and n not in added]
    out = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(report, out)
    out.close()
    return out.name, added


def bagged(fit, bags):
    """`fit` (locate_diagnose.fit_recipe) made to average its weights over `bags` bootstrap samples
    of the training issues' repositories (a fixed seed: the same samples every run)."""
    def fit_bagged(recipe, issues, names, lam, hand):
        rng = np.random.default_rng(7)
        repos = sorted({i.repo for i in issues})
        fits = [fit(recipe, [i for k in rng.choice(len(repos), len(repos)) for i in issues if i.repo == repos[k]],
                    names, lam, hand) for _ in range(bags)]
        return ld.Scorer(np.mean([f.w for f in fits], axis=0), fits[0].factors, names)
    return fit_bagged


def cross_validate(issues, names, hand, recipe, lam, bags=0):
    """locate_diagnose's two cross-validations of the recipe (bagged over `bags` samples when > 0), as
    printed figures, and its worst loss."""
    ids = [i.id for i in issues]
    base = ld.per_issue(ld.Scorer(*hand, names), issues, False)
    rf, cf, loss = ld.judged(recipe, issues, names, lam, hand, base, bagged(ld.fit_recipe, bags) if bags else ld.fit_recipe)
    fig = lambda f: " / ".join(f"{ld.mean(f, ids, k):.3f}" for k in ("Acc@1", "Acc@5", "MRR@10"))  # noqa: E731
    return fig(rf), fig(cf), loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--train-data", default="/work/shared/eval/localization/train.jsonl")
    ap.add_argument("--family", default="path,rank,norm")
    ap.add_argument("--recipe", default="mono-prior-nohist")
    ap.add_argument("--bag", type=int, default=0, help="also score the committed features' fit bagged over B samples")
    args = ap.parse_args()
    base = fl.feature_names()
    hw, hf = ld.weights_of(os.path.join(fl.REPO, "codegraph/src/locate/hand.json"), base)
    print(f"| features | L2 | CV by repository (Acc@1 / Acc@5 / MRR@10) | CV by category | worst loss vs hand |\n"
          f"|---|---|---|---|---|")
    for family in [None] + args.family.split(","):
        rows, added = augment(args.train, args.train_data, [family] if family else [], set(base), (hw, hf))
        names = base + added
        issues, _ = ld.load(rows, args.train_data, names)
        os.unlink(rows)
        hand = (np.concatenate([hw, np.zeros(len(added))]), hf)
        for lam in (0.003, 0.01, 0.03):
            rf, cf, loss = cross_validate(issues, names, hand, args.recipe, lam)
            print(f"| {family or 'the committed ones'} {'+ ' + ', '.join(added) if added and added != [family] else ''} | {lam} | {rf} | "
                  f"{cf} | {loss:.0f} |", flush=True)
            if args.bag and not family:
                rf, cf, loss = cross_validate(issues, names, hand, args.recipe, lam, args.bag)
                print(f"| the committed ones, bagged over {args.bag} | {lam} | {rf} | {cf} | {loss:.0f} |", flush=True)


if __name__ == "__main__":
    main()
