"""The store on PostgreSQL (issue 22): the audit writer alone committing
into a PostgreSQL database, against the same writer into a SQLite file;
the setup's SQLite store moved into PostgreSQL with `portcullis admin store
migrate`; and the small GET through two `portcullis serve` replicas on that
one database, the load spread over both, against one replica on it (and
the SQLite portcullis of the other scenarios), with the CPU the portcullis
processes and PostgreSQL spend per 1000 requests and the audit rows the
replicas committed against the requests they answered.

PostgreSQL 15 (Debian's, which scripts/setup installs) runs in a folder of
its own, started with initdb as the tests start theirs (as the `postgres`
user when the benchmark runs as root), on 127.0.0.1 only, with its default
durability (fsync and synchronous_commit on), and is stopped at the end.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from measure import NS, Path, check_configmap, cpu_seconds, h2load, log, markdown_tables, process_tree, summary, table

PG_BIN = "/usr/lib/postgresql/15/bin"
# The markers of this section in RESULTS.md, and its rows.
SECTION = "postgres-results"
ORDER = ("one replica", "two replicas", "portcullis on SQLite")
TARGET = f"/api/v1/namespaces/{NS}/configmaps/small"


def configure(cfg):
    """The portcullis binary beside bench_stack's folder (target/<profile>),
    and how much load: a handful of requests for the smoke run."""
    cfg.portcullis = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(cfg.bin))), "portcullis")
    cfg.replica_concurrencies = [4] if cfg.smoke else [16, 64]


def bench_stack(cfg, *args):
    output = subprocess.run([cfg.bin, *args], capture_output=True, text=True, timeout=900)
    if output.returncode != 0:
        raise SystemExit(f"bench_stack {args[0]} failed:\n{output.stderr}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """A PostgreSQL server in a fresh folder, stopped and removed by stop()."""

    def __init__(self):
        # Under /tmp, not the benchmark's folder: the postgres user must
        # reach it, and a unix socket's path is short.
        self.dir = tempfile.mkdtemp(prefix="pg-bench-")
        self.root = os.geteuid() == 0
        if self.root:
            shutil.chown(self.dir, "postgres", "postgres")
        self.port, self.process = free_port(), None
        data = os.path.join(self.dir, "data")
        self.run(self.owner("initdb") + ["--auth=trust", "--locale=C", "--encoding=UTF8", "--no-sync", "-U", "postgres", "-D", data])
        server = self.owner("postgres") + ["-D", data, "-p", str(self.port), "-k", self.dir]
        server += ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"]
        with open(os.path.join(self.dir, "postgres.log"), "w") as logfile:
            # setpriv execs postgres: this pid is the postmaster's.
            self.process = subprocess.Popen(server, stdout=logfile, stderr=subprocess.STDOUT, cwd=self.dir)
        deadline = time.monotonic() + 60
        while subprocess.run(self.client("pg_isready") + ["-q"]).returncode != 0:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"PostgreSQL did not start:\n{open(os.path.join(self.dir, 'postgres.log')).read()}")
            time.sleep(0.1)

    def owner(self, program):
        """A server program, as the folder's owner (initdb and postgres refuse root)."""
        drop = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] if self.root else []
        return drop + [f"{PG_BIN}/{program}"]

    def client(self, program):
        return [f"{PG_BIN}/{program}", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]

    def run(self, command):
        out = subprocess.run(command, capture_output=True, text=True, cwd=self.dir)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{out.stdout}{out.stderr}")
        return out.stdout.strip()

    def database(self, name):
        """A new database; its URL."""
        self.run(self.client("createdb") + [name])
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def query(self, database, sql):
        return self.run(self.client("psql") + ["-X", "-A", "-t", "-d", database, "-c", sql])

    def stop(self):
        """Fast shutdown (SIGINT to the postmaster), then the folder goes."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Replica:
    """`portcullis serve` on the PostgreSQL store, on a port of its own."""

    def __init__(self, name, cfg, stack, url):
        pc = stack["portcullis"]
        port = free_port()
        data_dir = os.path.join(cfg.work, f"{name}-data")
        os.makedirs(data_dir, exist_ok=True)
        env = dict(os.environ, PORTCULLIS_LISTEN=f"127.0.0.1:{port}", PORTCULLIS_DATA_DIR=data_dir)
        env["PORTCULLIS_STORE__URL"] = url
        env.setdefault("PORTCULLIS_LOG", "info")
        env.pop("PORTCULLIS_CONFIG", None)
        with open(os.path.join(cfg.work, f"{name}.log"), "w") as logfile:
            self.process = subprocess.Popen([cfg.portcullis, "--config", pc["config"], "serve"], env=env, stderr=logfile)
        self.path = Path(name, f"https://127.0.0.1:{port}", pc["cluster_path"], pc["person_token"], pc["ca_file"])
        self.path.process = self.process.pid
        deadline = time.monotonic() + 60
        while True:
            try:
                check_configmap(self.path)
                return
            except (OSError, SystemExit) as e:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{name} did not serve ({e}); see {logfile.name}")
                time.sleep(0.2)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def writer_alone(cfg, url):
    """`bench_stack audit` into a SQLite file and into PostgreSQL, interleaved."""
    runs = {"SQLite file": [], "PostgreSQL": []}
    for _ in range(cfg.repeats):
        for name, extra in (("SQLite file", []), ("PostgreSQL", ["--postgres", url])):
            r = bench_stack(cfg, "audit", "--dir", cfg.work, "--rows", str(cfg.audit_rows), *extra)
            if r["lost"]:
                raise SystemExit(f"the audit writer into {name} lost {r['lost']} rows")
            runs[name].append(r)
    rows = [(n, {"rps": summary(rs, "rows_per_second"), "lost": summary(rs, "lost")}) for n, rs in runs.items()]
    t = table(
        f"(g) audit writer alone: rows/s committed, {cfg.audit_rows} rows from 64 tasks, no row lost",
        rows,
        [("rps", "rows/s", False), ("lost", "lost", False)],
    )
    return {n: rs for n, rs in runs.items()}, t


def migrate(cfg, stack, url):
    """The setup's SQLite store (with every row the scenarios before wrote)
    copied into PostgreSQL by the CLI, as an operator moves an installation."""
    began = time.monotonic()
    out = admin(cfg, stack, url, "store", "migrate")
    seconds = time.monotonic() - began
    if out.returncode != 0 or "audit chain intact" not in out.stdout:
        raise SystemExit(f"admin store migrate failed:\n{out.stdout}{out.stderr}")
    counts = {}
    for line in out.stdout.splitlines():
        table_name, _, rows = line.partition(": ")
        if rows.endswith(" rows"):
            counts[table_name] = int(rows[: -len(" rows")])
    log(f"  migrated {sum(counts.values())} rows ({counts.get('audit', 0)} audit rows) in {seconds:.1f} s")
    return {"seconds": seconds, "rows": sum(counts.values()), "audit_rows": counts.get("audit", 0)}


def admin(cfg, stack, url, *args, timeout=1800):
    """`portcullis admin …` on the PostgreSQL store, as an operator runs it."""
    env = dict(os.environ, PORTCULLIS_STORE__URL=url)
    env.pop("PORTCULLIS_CONFIG", None)
    command = [cfg.portcullis, "--config", stack["portcullis"]["config"], "admin", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def verify(cfg, stack, url):
    """The one chain both replicas appended to verifies end to end."""
    out = admin(cfg, stack, url, "audit", "verify")
    said = out.stdout.strip()
    if out.returncode != 0 or not said.startswith("audit chain intact: "):
        raise SystemExit(f"the replicas' audit chain does not verify:\n{out.stdout}{out.stderr}")
    log(f"  {said}")
    return int(said.split(": ")[1].split()[0])


def audit_rows(pg, url):
    return int(pg.query(url, "SELECT count(*) FROM audit"))


def load(cfg, paths, concurrency, pg=None, url=None):
    """h2load on every path at once, the connections split between them;
    the requests/s summed, the worst p50 and p99, the CPU of the paths'
    processes and of PostgreSQL in ms per 1000 requests (CPU over the wall
    time over the rate, as measure.py counts), and the audit rows the
    database gained against the requests answered."""
    per = max(concurrency // len(paths), 1)
    requests = cfg.requests and max(cfg.requests // len(paths), per)
    own = [p for path in paths for p in process_tree(path.process)]
    database = process_tree(pg.process.pid) if pg else []
    rows_before = audit_rows(pg, url) if pg else 0
    own_before, db_before, began = cpu_seconds(own), cpu_seconds(database), time.monotonic()
    results = [None] * len(paths)

    def one(i):
        results[i] = h2load(paths[i], TARGET, per, cfg.seconds, requests)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(paths))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if None in results:
        raise SystemExit("an h2load run failed")
    wall = time.monotonic() - began
    rps = sum(r["rps"] for r in results)
    combined = {
        "rps": rps,
        "p50_ms": max(r["p50_ms"] for r in results),
        "p99_ms": max(r["p99_ms"] for r in results),
        "succeeded": sum(r["succeeded"] for r in results),
        "cpu_ms": 1e6 * (cpu_seconds(own) - own_before) / wall / rps,
        "pg_cpu_ms": 1e6 * (cpu_seconds(database) - db_before) / wall / rps if pg else None,
    }
    if pg:
        combined.update(committed(pg, url, rows_before, combined["succeeded"]))
    return combined


def committed(pg, url, before, sent):
    """Rows committed since `before`, once they reach the requests answered
    or stop growing (reads are group-committed within 100 ms; h2load's
    warm-up requests have rows too, so stored may pass sent)."""
    deadline, last = time.monotonic() + 15, -1
    while True:
        stored = audit_rows(pg, url) - before
        if stored >= sent or (stored == last and time.monotonic() > deadline):
            return {"stored": stored, "lost": max(sent - stored, 0)}
        last = stored
        time.sleep(0.3)


def replicas(cfg, stack, pg, url):
    """One replica, two replicas and the SQLite portcullis, interleaved."""
    a = Replica("replica-a", cfg, stack, url)
    b = None
    try:
        b = Replica("replica-b", cfg, stack, url)
        sqlite = Path("portcullis on SQLite", stack["portcullis"]["url"], stack["portcullis"]["cluster_path"],
                      stack["portcullis"]["person_token"], stack["portcullis"]["ca_file"])
        sqlite.process = stack["portcullis_pid"]
        out, tables = {}, []
        for c in cfg.replica_concurrencies:
            runs = {name: [] for name in ORDER}
            for _ in range(cfg.repeats):
                runs["one replica"].append(load(cfg, [a.path], c, pg, url))
                runs["two replicas"].append(load(cfg, [a.path, b.path], c, pg, url))
                runs["portcullis on SQLite"].append(load(cfg, [sqlite], c))
            rows = [(n, {k: summary(rs, k) for k in KEYS if rs[0].get(k) is not None}) for n, rs in runs.items()]
            title = f"(h) GET 1 KiB ConfigMap, {c} connections in all (split over the replicas), one PostgreSQL"
            tables.append(table(title, rows, COLUMNS))
            out[str(c)] = dict(rows)
        return out, tables
    finally:
        for replica in (a, b):
            if replica:
                replica.stop()


KEYS = ("rps", "p50_ms", "p99_ms", "cpu_ms", "pg_cpu_ms", "lost")
COLUMNS = [
    ("rps", "req/s", False),
    ("p50_ms", "p50 ms", False),
    ("p99_ms", "p99 ms", False),
    ("cpu_ms", "portcullis CPU ms/1000 req", False),
    ("pg_cpu_ms", "PostgreSQL CPU ms/1000 req", False),
    ("lost", "audit rows lost", False),
]


def targets(out):
    writer = out["writer"]["PostgreSQL"]
    writer_rps = sorted(r["rows_per_second"] for r in writer)[len(writer) // 2]
    two = max(rows["two replicas"]["rps"]["median"] for rows in out["replicas"].values())
    lost = sum(
        rows[n]["lost"]["max"] for rows in out["replicas"].values() for n in ("one replica", "two replicas")
    )
    return [
        (
            "audit writer on PostgreSQL keeps up with two replicas' combined small-GET rate",
            f"{writer_rps:.0f} rows/s vs {two:.0f} req/s",
            writer_rps >= two,
        ),
        ("no audit row lost by the replicas", f"{lost} lost", lost == 0),
    ]


def run(cfg, stack):
    """Every PostgreSQL scenario; returns (results, tables)."""
    began = time.monotonic()
    configure(cfg)
    pg = PgServer()
    try:
        out = {}
        out["writer"], t = writer_alone(cfg, pg.database("audit_alone"))
        tables = [t]
        url = pg.database("portcullis")
        out["migrate"] = migrate(cfg, stack, url)
        out["replicas"], t = replicas(cfg, stack, pg, url)
        tables += t
        out["verified_rows"] = verify(cfg, stack, url)
    finally:
        pg.stop()
    out["targets"] = targets(out)
    for name, value, ok in out["targets"]:
        print(f"  {'met    ' if ok else 'NOT MET'}  {name}: {value}")
    out["tables"] = tables
    log(f"(g, h) PostgreSQL scenarios done in {time.monotonic() - began:.1f} s")
    return out, tables


def markdown(info, out, cfg):
    """The generated part of RESULTS.md's PostgreSQL section."""
    m = out["migrate"]
    lines = [
        f"Run {info['date']}, commit `{info['commit']}`, {info['cores']} cores ({info['cpu']}). PostgreSQL 15 on the "
        "same machine, 127.0.0.1, default durability (fsync, synchronous_commit on). Each cell is the median of "
        f"{cfg.repeats} interleaved runs of {cfg.seconds} s; spread is min-max. The replicas' store is the "
        f"benchmark's SQLite store moved by `portcullis admin store migrate`: {m['rows']} rows ({m['audit_rows']} "
        f"of them audit rows) copied and the chain verified in {m['seconds']:.1f} s. CPU is the portcullis "
        "processes' (both replicas together) and the PostgreSQL server's (postmaster and backends), in ms per "
        "1000 requests; \"audit rows lost\" counts requests answered 2xx against rows the database gained. "
        f"After the runs the one chain both replicas appended to verified: {out['verified_rows']} rows.",
        "",
        "| target | measured | met |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} | {value} | {'yes' if ok else '**no**'} |" for name, value, ok in out["targets"]]
    return "\n".join(lines + markdown_tables(out["tables"]))
