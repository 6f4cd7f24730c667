#!/usr/bin/env python3
"""Sessions: over a 5-question conversation per issue, how many tokens does `get_context` spend to put the files a fix
edits in front of the agent — in one session (what was sent is cited, not repeated) against 5 independent calls?

Data: the localization dev set (/work/shared/eval/localization/dev.jsonl) with the indexes `benches/localization.py`
builds (`<work>/<owner+name>/db`, one snapshot tag `c-<sha12>` per base commit: run it first, e.g. with `--reuse`).

Per issue, five questions: the issue's title, then four follow-ups taken from its body — sentences of six words or
more, code blocks, logs and URLs left out, spread over the body — with every gold path, file name and dotted module
(`a/b/c.py`, `c.py`, `a.b.c`) removed (`[file]`), so no question names the answer's path. A body with fewer
than four such sentences repeats the title (an agent asking again). Each is sent to `get_context` (MCP over stdio, one `ctxd mcp`
process per repository, `as_of` the issue's tag) at each budget, either in one session per issue and budget, or each
in a fresh session of its own (= independent calls).

Reported per budget and mode: gold-file recall after each question (mean share of gold files some answer so far has
shown a block of), the share of issues with every gold file shown, tokens per question and in all, blocks repeated
(shown by an earlier answer of the same conversation).

    python3 benches/sessions.py --ctxd BIN [--budgets 2000,8000] [--limit N] [--json OUT]
"""
import argparse, collections, json, os, re, subprocess, sys, time

from localization import dev_set_args

QUESTIONS = 5


def questions(issue):
    text = issue["query"]
    title, _, body = text.partition("\n")
    body = re.sub(r"```.*?(```|$)", " ", body, flags=re.S)
    body = re.sub(r"https?://\S+", " ", body)
    sents = []
    for para in re.split(r"\n\s*\n", body):
        lines = [l for l in para.splitlines() if not re.match(r"\s*([-*>#|]|\w+==|\$ )", l)]
        for s in re.split(r"(?<=[.!?])\s+", " ".join(lines)):
            s = " ".join(s.split())
            if len(s.split()) >= 6 and not s.lower().startswith(("i searched", "i agree", "- [")):
                sents.append(s[:400])
    picks = [sents[round(i * (len(sents) - 1) / 3)] for i in range(4)] if len(sents) >= 4 else sents
    out = [title.strip()] + picks
    while len(out) < QUESTIONS:
        out.append(title.strip())
    hide = set()
    for g in issue["gold_files"]:
        base = g.rsplit("/", 1)[-1]
        hide |= {g, base, g.rsplit(".", 1)[0].replace("/", ".")}
    hide = sorted((h for h in hide if len(h) >= 3), key=len, reverse=True)
    clean = []
    for q in out[:QUESTIONS]:
        for h in hide:
            q = re.sub(re.escape(h), "[file]", q, flags=re.I)
        clean.append(q)
    return clean


class Mcp:
    def __init__(self, ctxd, db):
        self.p = subprocess.Popen([ctxd, "mcp", "--db", db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.n = 0
        self.call_raw("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "sessions-bench", "version": "1"}})

    def call_raw(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}) + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("ctxd mcp exited")
            msg = json.loads(line)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def context(self, **args):
        r = self.call_raw("tools/call", {"name": "get_context", "arguments": args})
        if r.get("isError"):
            raise RuntimeError(r["content"][0]["text"])
        return r["structuredContent"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dev_set_args(ap)
    ap.add_argument("--budgets", default="2000,8000")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--no-skeletons", action="store_true", help="whole blocks only (the assembly before skeletons)")
    ap.add_argument("--assembly", default="auto", help="auto, balanced, hierarchical, sequential or thematic")
    ap.add_argument("--json")
    a = ap.parse_args()
    budgets = [int(b) for b in a.budgets.split(",")]
    issues = [json.loads(l) for l in open(a.data) if l.strip()][: a.limit]
    by_repo = collections.defaultdict(list)
    for x in issues:
        by_repo[x["repo"]].append(x)
    rows = []
    t0 = time.time()
    for repo in sorted(by_repo):
        mcp = Mcp(os.path.abspath(a.ctxd), os.path.join(a.work, repo.replace("/", "+"), "db"))
        for x in by_repo[repo]:
            qs, gold, tag = questions(x), set(x["gold_files"]), "c-" + x["base_commit"][:12]
            for budget in budgets:
                for mode in ("independent", "session"):
                    shown, seen_blocks, row = set(), set(), {"id": x["id"], "budget": budget, "mode": mode,
                                                            "recall": [], "tokens": [], "repeated": 0}
                    for i, q in enumerate(qs):
                        session = f"{mode}-{x['id']}-{budget}" + (f"-{i}" if mode == "independent" else "")
                        out = mcp.context(query=q, budget=budget, as_of=tag, session=session, format="markdown",
                                          skeletons=not a.no_skeletons, assembly=a.assembly)
                        cites = out.get("citations", [])
                        row["repeated"] += sum(1 for c in cites if c in seen_blocks)
                        seen_blocks |= set(cites)
                        shown |= {c.rsplit(":", 1)[0] for c in cites}
                        row["recall"].append(len(gold & shown) / len(gold))
                        row["tokens"].append(out["tokens_used"])
                    rows.append(row)
            print(f"{x['id']}: " + ", ".join(f"{r['mode'][:3]}@{r['budget']} R {r['recall'][-1]:.2f} "
                                            f"tok {sum(r['tokens'])}" for r in rows[-2 * len(budgets):]),
                  flush=True)
        mcp.close()
    print(f"\n### get_context over {QUESTIONS}-question conversations ({len(issues)} issues, "
          f"{time.time() - t0:.0f} s)\n")
    print("| budget | mode | recall after q1 | after q5 | all gold shown | tokens (5 questions) | blocks repeated |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for budget in budgets:
        for mode in ("independent", "session"):
            rs = [r for r in rows if r["budget"] == budget and r["mode"] == mode]
            n = len(rs) or 1
            m = {"recall_q1": sum(r["recall"][0] for r in rs) / n, "recall_q5": sum(r["recall"][-1] for r in rs) / n,
                 "all_gold": sum(r["recall"][-1] == 1.0 for r in rs) / n,
                 "tokens": sum(sum(r["tokens"]) for r in rs) / n, "repeated": sum(r["repeated"] for r in rs) / n}
            summary[f"{mode}@{budget}"] = m
            print(f"| {budget} | {mode} | {m['recall_q1']:.3f} | {m['recall_q5']:.3f} | {m['all_gold']:.3f} | "
                  f"{m['tokens']:.0f} | {m['repeated']:.1f} |")
    if a.json:
        json.dump({"summary": summary, "rows": rows}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
