"""Reads a running ctxd through Arrow Flight with pyarrow, and its LanceDB table with the
lancedb and pylance packages from PyPI. Called by the integration test with:
    flight_client.py <grpc://host:port> <db dir> <version> <rows at version> <query> <expected path>
Prints one JSON line of what it saw; exits non-zero (AssertionError) on any mismatch."""
import json, os, sys

import lance
import lancedb
import pyarrow as pa
import pyarrow.flight as flight

location, db, version, rows, query, expected = sys.argv[1:7]
version, rows = int(version), int(rows)
client = flight.connect(location)

infos = list(client.list_flights())
by_version = {int(i.descriptor.path[1].decode()): i for i in infos}
assert version in by_version, f"version {version} not in {sorted(by_version)}"
info = by_version[version]
assert info.total_records == rows, (info.total_records, rows)
meta = json.loads(info.app_metadata)
assert meta["version"] == version and "timestamp" in meta, meta
assert "content" in info.schema.names and "vector" in info.schema.names, info.schema

# A whole snapshot through the ticket list_flights hands out.
snap = client.do_get(info.endpoints[0].ticket).read_all()
assert snap.num_rows == rows, (snap.num_rows, rows)

# A search, as a ticket; and the same search as of the snapshot.
ticket = flight.Ticket(json.dumps({"query": query, "k": 3, "mode": "bm25"}).encode())
hits = client.do_get(ticket).read_all()
assert hits.num_rows >= 1 and hits.column("path")[0].as_py() == expected, hits.to_pylist()
assert hits.schema.names[:3] == ["path", "start_line", "end_line"], hits.schema
old = client.do_get(flight.Ticket(json.dumps({"query": query, "k": 3, "mode": "bm25", "as_of": version}).encode())).read_all()
assert old.num_rows >= 1, old

# Bad tickets are errors with a reason, not crashes.
try:
    client.do_get(flight.Ticket(b'{"table":"nope"}')).read_all()
    raise AssertionError("a bad ticket was accepted")
except (flight.FlightError, pa.ArrowInvalid) as e:  # INVALID_ARGUMENT surfaces as ArrowInvalid
    assert "unknown table" in str(e), e

# The on-disk format is part of the API: lancedb and pylance open the table and read version N.
conn = lancedb.connect(db)
names = conn.table_names() if hasattr(conn, "table_names") else conn.list_tables()
names = list(getattr(names, "tables", names))
assert "chunks" in names, names
tbl = conn.open_table("chunks")
tbl.checkout(version)
assert tbl.count_rows() == rows, (tbl.count_rows(), rows)
ds = lance.dataset(os.path.join(db, "chunks.lance"), version=version)
assert ds.count_rows() == rows, (ds.count_rows(), rows)
latest = lance.dataset(os.path.join(db, "chunks.lance"))
assert latest.version > version, (latest.version, version)
print(json.dumps({"flights": len(infos), "rows": rows, "hits": hits.num_rows, "latest_version": latest.version}))
