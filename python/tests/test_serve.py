"""`ndfusion serve` (built by `cargo test`, which runs before these tests) queried through ADBC's
Flight SQL driver 1.13, as a notebook would: its DB-API (`execute` with and without parameters,
`fetch_arrow_table`, `adbc_get_objects`, `adbc_get_table_schema`, `adbc_cancel`), basic auth
with the token as the password and a bearer header; the answers are the command line's."""

import os
import subprocess
import threading
import time
from pathlib import Path

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import pytest

ROOT = Path(__file__).resolve().parents[2]
NDFUSION = ROOT / "target" / "debug" / "ndfusion"
TOKEN = "pytest-serve-token-0123456789"
DEMO = ("CREATE EXTERNAL TABLE demo STORED AS ZARR "
        "LOCATION 'tests/data/kerchunk/refs_v1.json'")


def start(log, extra=()):
    """`ndfusion serve` with the token and the demo table; yields its address."""
    if not NDFUSION.exists():
        pytest.fail(f"{NDFUSION} is missing: run cargo test (or cargo build) first")
    env = dict(os.environ, NDFUSION_SERVE_TOKEN=TOKEN)
    with open(log, "w") as out:
        process = subprocess.Popen(
            [str(NDFUSION), "serve", "--bind", "127.0.0.1:0", "-c", DEMO, *extra],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        address = None
        deadline = time.monotonic() + 60
        while address is None:
            for line in log.read_text().splitlines():
                if "Flight SQL on " in line:
                    address = line.rsplit(" ", 1)[1]
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield address
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from start(tmp_path_factory.mktemp("serve") / "serve.log")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """The same server over TLS: a CA and a certificate for 127.0.0.1 written by openssl."""
    d = tmp_path_factory.mktemp("tls")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for args in (
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=test CA", "-addext", "basicConstraints=critical,CA:TRUE"],
        ["req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "node.pem", "-days", "2", "-extfile", "ext.cnf"],
    ):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    tls = ["--tls-cert", str(d / "node.pem"), "--tls-key", str(d / "node.key")]
    for address in start(d / "serve.log", tls):
        yield address, (d / "ca.pem").read_text()


def cli(sql):
    done = subprocess.run([str(NDFUSION), "--quiet", "--format", "csv", "-c", DEMO, "-c", sql],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [line.split(",") for line in done.stdout.strip().splitlines()[1:]]


def connect(address, **db_kwargs):
    return flight_sql.connect(f"grpc://{address}", db_kwargs=db_kwargs)


def test_queries_answer_as_the_command_line(server):
    with connect(server, username="anyone", password=TOKEN) as conn, conn.cursor() as cur:
        sql = "SELECT lat, count(*) AS n, sum(temp) AS s FROM demo GROUP BY lat ORDER BY lat"
        cur.execute(sql)
        table = cur.fetch_arrow_table()
        rows = [[repr(float(r["lat"])), str(r["n"]), repr(float(r["s"]))] for r in table.to_pylist()]
        assert rows == [[repr(float(lat)), n, repr(float(s))] for lat, n, s in cli(sql)]

        cur.execute("SELECT time, lon, temp FROM demo WHERE temp > $1 AND lat = $2 ORDER BY temp",
                    parameters=(25.0, 30.0))
        got = cur.fetch_arrow_table().to_pylist()
        want = cli("SELECT time, lon, temp FROM demo WHERE temp > 25.0 AND lat = 30.0 ORDER BY temp")
        assert [float(r["temp"]) for r in got] == [float(w[2]) for w in want]
        assert len(got) == len(want) == 4


def test_question_mark_parameters(server):
    """ADBC, JDBC and Go's driver write placeholders as `?` (issue 72): numbered in the order
    they stand and bound to the parameters, integers, floats, strings and timestamps; the same
    prepared statement bound again; a wrong count or type is INVALID_ARGUMENT, and the server
    keeps serving."""
    import datetime
    with connect(server, username="anyone", password=TOKEN) as conn, conn.cursor() as cur:
        cur.execute("SELECT time, lon, temp FROM demo WHERE temp > ? AND lat = ? ORDER BY temp",
                    parameters=(25.0, 30.0))
        got = cur.fetch_arrow_table().to_pylist()
        want = cli("SELECT time, lon, temp FROM demo WHERE temp > 25.0 AND lat = 30.0 ORDER BY temp")
        assert [float(r["temp"]) for r in got] == [float(w[2]) for w in want]
        assert len(got) == 4
        # A '?' in a string is no placeholder; an integer and a string bound.
        cur.execute("SELECT ? + 1 AS x, concat(?, '?') AS s", parameters=(41, "why"))
        assert cur.fetch_arrow_table().to_pylist() == [{"x": 42, "s": "why?"}]
        # A timestamp, as the column's type.
        first = cli("SELECT min(time) FROM demo")[0][0]
        cur.execute("SELECT count(*) AS n FROM demo WHERE time > ?",
                    parameters=(datetime.datetime.fromisoformat(first),))
        n = cur.fetch_arrow_table().to_pylist()[0]["n"]
        assert n == int(cli(f"SELECT count(*) FROM demo WHERE time > TIMESTAMP '{first}'")[0][0])
        # One prepared statement bound twice.
        cur.adbc_prepare("SELECT count(*) AS n FROM demo WHERE temp > ?")
        counts = []
        for threshold in (25.0, 0.0):
            cur.execute("SELECT count(*) AS n FROM demo WHERE temp > ?", parameters=(threshold,))
            counts.append(cur.fetch_arrow_table().to_pylist()[0]["n"])
        assert counts == [int(cli(f"SELECT count(*) FROM demo WHERE temp > {t}")[0][0])
                          for t in ("25.0", "0.0")]
        for sql, parameters in [
            ("SELECT ? AS a, ? AS b", (1,)),
            ("SELECT ? AS a", (1, 2)),
            ("SELECT count(*) FROM demo WHERE lat = ?", ("north",)),
            ("SELECT ? + $1", (1,)),
        ]:
            with pytest.raises(Exception) as refused:
                cur.execute(sql, parameters=parameters)
                cur.fetch_arrow_table()
            assert "INVALID_ARGUMENT" in str(refused.value) or "InvalidArgument" in str(
                refused.value), (sql, str(refused.value))
        cur.execute("SELECT count(*) AS n FROM demo")
        assert cur.fetch_arrow_table().to_pylist()[0]["n"] > 0


def test_catalog_calls(server):
    bearer = {adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: f"Bearer {TOKEN}"}
    with connect(server, **bearer) as conn:
        schema = conn.adbc_get_table_schema("demo")
        assert schema.names == ["lat", "lon", "time", "land", "pres", "temp", "__global_attrs__"]
        assert str(schema.field("temp").type) == "float"
        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        catalog = next(c for c in objects if c["catalog_name"] == "datafusion")
        public = next(s for s in catalog["catalog_db_schemas"] if s["db_schema_name"] == "public")
        assert [t["table_name"] for t in public["db_schema_tables"]] == ["demo"]
        assert sorted(conn.adbc_get_table_types()) == ["LOCAL TEMPORARY", "TABLE", "VIEW"]


def test_refusals_reach_the_client(server):
    with pytest.raises(Exception, match="(?i)unauthenticated|token"):
        with connect(server, username="anyone", password="wrong-token-0123456789") as conn:
            with conn.cursor() as cur:
                cur.execute("SELECT 1")
    with connect(server, username="anyone", password=TOKEN) as conn, conn.cursor() as cur:
        with pytest.raises(Exception, match="DROP TABLE is not allowed"):
            cur.execute("DROP TABLE demo")
        with pytest.raises(Exception, match="nope"):
            cur.execute("SELECT nope FROM demo")
        cur.execute("SELECT count(*) AS n FROM demo")
        assert cur.fetch_arrow_table().to_pylist() == [{"n": 72}]


def test_token_and_tls(tls_server):
    address, ca = tls_server
    roots = {adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: ca}
    with flight_sql.connect(f"grpc+tls://{address}",
                            db_kwargs={"username": "anyone", "password": TOKEN, **roots}) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) AS n FROM demo WHERE lat = $1", parameters=(20.0,))
            assert cur.fetch_arrow_table().to_pylist() == [{"n": 24}]
    # Without the CA the server's certificate is not trusted; without TLS nothing answers.
    for url, kwargs in ((f"grpc+tls://{address}", {}), (f"grpc://{address}", {})):
        with pytest.raises(Exception):
            with flight_sql.connect(url, db_kwargs={"username": "a", "password": TOKEN,
                                                   **kwargs}) as conn:
                with conn.cursor() as cur:
                    cur.execute("SELECT 1")


def test_adbc_cancel_ends_the_query_on_the_server(tmp_path):
    """`adbc_cancel` from another thread, mid-stream: the reader gets an error at once and the
    server ends the query (its log line), as for a client gone away."""
    log = tmp_path / "serve.log"
    for address in start(log):
        with connect(address, username="anyone", password=TOKEN) as conn:
            cur = conn.cursor()
            streaming, errors = threading.Event(), []

            def read():
                try:
                    cur.execute("SELECT value FROM generate_series(1, 400000000)")
                    for _ in cur.fetch_record_batch():
                        streaming.set()
                except Exception as e:  # noqa: BLE001 - the error is the point
                    errors.append(e)
                streaming.set()

            reader = threading.Thread(target=read)
            reader.start()
            assert streaming.wait(60)
            cur.adbc_cancel()
            reader.join(30)
            assert not reader.is_alive()
            assert errors and "cancel" in str(errors[0]).lower(), errors
            cur.close()
        deadline = time.monotonic() + 20
        while 'outcome="cancelled by the client"' not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)


def test_writes_answer_with_the_schema_their_flight_info_gives(tmp_path):
    """With --allow-ddl, COPY and INSERT from ADBC answer their row count under the schema
    GetFlightInfo reported (issue 72: ADBC refuses an answer whose schema is not the
    FlightInfo's), through a query and through an update, with `?` parameters too."""
    for address in start(tmp_path / "serve.log", ["--allow-ddl"]):
        with connect(address, username="anyone", password=TOKEN) as conn, conn.cursor() as cur:
            cur.execute(f"COPY (SELECT lat, lon, max(temp) AS m FROM demo WHERE temp > ? "
                        f"GROUP BY 1, 2) TO '{tmp_path}/g.zarr' STORED AS ZARR OPTIONS "
                        "('dimensions' 'lat,lon')", parameters=(0.0,))
            assert cur.fetch_arrow_table().to_pylist() == [{"count": 12}]
            cur.execute(f"COPY (SELECT 'a' AS station, 1.0 AS depth, 2.0 AS temp) TO "
                        f"'{tmp_path}/p.lance' STORED AS LANCE_ND OPTIONS ('dimensions' "
                        "'depth', 'batch_by' 'station')")
            assert cur.fetch_arrow_table().to_pylist() == [{"count": 1}]
            cur.execute(f"CREATE EXTERNAL TABLE p STORED AS LANCE_ND LOCATION '{tmp_path}/p.lance'")
            cur.fetch_arrow_table()
            insert = ("INSERT INTO p (depth, temp, __global_attrs__) "
                      "SELECT ? AS depth, 3.0 AS temp, named_struct('station', 'b')")
            cur.execute(insert, parameters=(5.0,))
            assert cur.fetch_arrow_table().to_pylist() == [{"count": 1}]
            cur.adbc_statement.set_sql_query(insert.replace("?", "6.0"))
            assert cur.adbc_statement.execute_update() == 1
            cur.execute("SELECT count(*) AS n FROM p")
            assert cur.fetch_arrow_table().to_pylist() == [{"n": 3}]
