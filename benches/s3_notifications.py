#!/usr/bin/env python3
"""What staying fresh costs on a big bucket (issue 87, item 3): S3 requests per minute of a
writer that lists the prefix every `poll_interval_secs` (10, the default) against one that follows
the bucket's event notifications through an SQS queue (`sqs_queue`; a listing only at start and
every `reconcile_interval_secs`, 6 h by default), under the same stream of changes.

A moto server holds --objects small text objects; S3 requests go through a counting proxy
(benches/fault_proxy.py: per operation), SQS requests through a second one. Each writer runs
`ctxd serve` full-text only (`embed = false`: the requests, not the embedding, are measured),
first polling, then with the queue on the same index; after it is ready, one object is written
every 60/--changes seconds for --minutes, and after each the bench waits until a unique word of
it is searchable (the change's lag). Prints requests per minute by operation and the lags.

    ~/.cache/ctxd/py-venv/bin/python benches/s3_notifications.py --ctxd BIN \
        [--objects 100000] [--changes 10] [--minutes 3] [--work DIR]
"""
import argparse, json, os, sys, time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ctxd_daemon import post, start_serve, stop_daemon  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from load import S3_ENV  # noqa: E402
from sharded_build import work_and_moto  # noqa: E402


def client(service, endpoint):
    import boto3

    return boto3.client(service, endpoint_url=endpoint, aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")


def text(i):
    return f"# Note {i}\n\nThe ledger entry {i} balances the account of shelf {i % 97}.\n"


def measure(ctxd, config, work, s3, s3_proxy, sqs_proxy, changes, minutes, first_key, label):
    """Starts a writer on `config`, then writes `changes` objects a minute for `minutes`; returns
    its S3 and SQS requests per minute and each change's lag (write -> searchable)."""
    os.makedirs(work, exist_ok=True)
    proc, base, ready = start_serve(ctxd, ["--config", config], ready_within=3600, work=None)
    print(f"{label}: ready in {ready:.0f}s", flush=True)
    time.sleep(5)
    s3_proxy.reset_counts()
    sqs_proxy.reset_counts()
    lags, pending, t0 = [], [], time.time()
    n = int(changes * minutes)

    def check(until):
        """Polls the changes not yet searchable until `until` (each one's lag once found)."""
        while True:
            for item in list(pending):
                word, key, wrote = item
                found = post(base, "/v1/search", {"query": word, "mode": "bm25", "k": 1})["results"]
                if found and found[0]["path"] == key:
                    lags.append(time.time() - wrote)
                    pending.remove(item)
            if time.time() >= until:
                return
            time.sleep(0.1)

    for k in range(n):
        check(t0 + k * 60.0 / changes)
        word = "zq" + "".join(chr(97 + int(d)) for d in str(first_key + k))  # letters only: one token
        key = f"changes/{label}-{k}.md"
        s3.put_object(Bucket="corpus", Key=f"src/{key}", Body=f"# Change\n\nThe {word} arrived.\n".encode())
        pending.append((word, key, time.time()))
    check(t0 + minutes * 60)
    elapsed = (time.time() - t0) / 60
    s3_rate = {op: c / elapsed for op, c in sorted(dict(s3_proxy.requests).items())}
    sqs_rate = sum(dict(sqs_proxy.requests).values()) / elapsed
    end = time.time() + 120
    while pending and time.time() < end:
        check(time.time() + 1)
    lags.extend(float("inf") for _ in pending)
    stop_daemon(proc, None)
    lags.sort()
    return {"s3_per_minute": s3_rate, "s3_total_per_minute": sum(s3_rate.values()), "sqs_per_minute": sqs_rate,
            "lag_p50": lags[len(lags) // 2], "lag_max": lags[-1], "changes": n, "minutes": elapsed}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--changes", type=float, default=10, help="objects written per minute")
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work, moto, endpoint = work_and_moto(a.work, "ctxd-s3-notifications-")
    port = int(endpoint.rsplit(":", 1)[1])
    s3_proxy, sqs_proxy = FaultProxy(port), FaultProxy(port)
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=s3_proxy.endpoint, AWS_ENDPOINT_URL_SQS=sqs_proxy.endpoint)
    try:
        s3, sqs = client("s3", endpoint), client("sqs", endpoint)
        s3.create_bucket(Bucket="corpus")
        t0 = time.time()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: s3.put_object(Bucket="corpus", Key=f"src/notes/{i // 1000}/n{i}.md",
                                                  Body=text(i).encode()), range(a.objects)))
        print(f"{a.objects} objects uploaded in {time.time() - t0:.0f}s", flush=True)
        queue = sqs.create_queue(QueueName="ctxd-events")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        db, mirror = os.path.join(work, "db"), os.path.join(work, "mirror")

        def config(name, extra):
            path = os.path.join(work, f"{name}.toml")
            with open(path, "w") as f:
                f.write(f'[source]\nroot = "s3://corpus/src"\nembed = false\nmirror_dir = "{mirror}"\n{extra}'
                        f'[index]\ndb = "{db}"\n[server]\n')
            return path

        result = {"objects": a.objects, "changes_per_minute": a.changes}
        result["polling"] = measure(a.ctxd, config("polling", "poll_interval_secs = 10\n"), work, s3, s3_proxy,
                                    sqs_proxy, a.changes, a.minutes, 0, "polling")
        print(json.dumps(result["polling"]), flush=True)
        s3.put_bucket_notification_configuration(Bucket="corpus", NotificationConfiguration={"QueueConfigurations": [
            {"QueueArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})
        result["notifications"] = measure(a.ctxd, config("events", f'sqs_queue = "{queue}"\n'), work, s3, s3_proxy,
                                          sqs_proxy, a.changes, a.minutes, 100_000, "events")
        print(json.dumps(result["notifications"]), flush=True)
        p, e = result["polling"]["s3_total_per_minute"], result["notifications"]["s3_total_per_minute"]
        pl, el = result["polling"]["s3_per_minute"].get("list", 0), result["notifications"]["s3_per_minute"].get("list", 0)
        print(f"S3 requests a minute: polling {p:.1f} (list {pl:.1f}), notifications {e:.1f} (list {el:.2f}): "
              f"{100 * e / max(p, 1e-9):.2f} % (listings {100 * el / max(pl, 1e-9):.2f} %); SQS requests a minute "
              f"{result['notifications']['sqs_per_minute']:.1f}; change -> searchable p50/max: polling "
              f"{result['polling']['lag_p50']:.2f}/{result['polling']['lag_max']:.2f} s, notifications "
              f"{result['notifications']['lag_p50']:.2f}/{result['notifications']['lag_max']:.2f} s")
        if a.out:
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)
    finally:
        s3_proxy.stop()
        sqs_proxy.stop()
        moto.kill()


if __name__ == "__main__":
    main()
