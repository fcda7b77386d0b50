#!/usr/bin/env python3
"""The benchmark's scenarios, run by scripts/bench against a running stack.

Reads the stack description (addresses, tokens, pids) that scripts/bench
writes, measures each scenario against every path interleaved (A B C D A B
C D ...) and repeated, prints a table per scenario, and writes the results as
JSON (and, for a full run, the generated part of benches/RESULTS.md).

Load comes from h2load (nghttp2-client): HTTP/2 over TLS where the path
offers it (direct, portcullis, nginx), HTTP/1.1 to kubectl proxy (plain HTTP,
HTTP/1.1 only); one stream per connection, so "concurrency" is the number
of connections on every path. Watches, MCP calls, redaction and the audit
writer are driven by the bench_stack example.

Beside each h2load run's rate and latency: the CPU that the path's own
process (portcullis serve, kubectl proxy, nginx's master and workers) and
the simulated cluster spent, in ms per 1000 requests, from their
/proc/<pid>/stat before and after the run.

Every measured request must answer 2xx, and each path's answer is checked
once per scenario (right object, right number of items, Secret values
hidden or shown as the path promises): a wrong answer fails the run, which
is what `scripts/bench --smoke` relies on.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import ssl
import subprocess
import time
import urllib.request

import postgres
import real_upstream
from measure import NS, Path, check_configmap, check_list, h2load, interleaved, log, rows_of, summary, table, with_cpu
from measure import build_note, check_results_md, markdown_tables, write_results_md
from targets import RAW_LIST, judged, targets


# The CPU columns of every h2load scenario: the path's own process (nginx:
# master and workers) and the simulated cluster's, per 1000 requests.
CPU_COLUMNS = [("cpu_ms", "CPU ms/1000 req", False), ("upstream_cpu_ms", "cluster CPU ms/1000 req", False)]
LATENCY_COLUMNS = [("rps", "req/s", True), ("p50_ms", "p50 ms", True), ("p99_ms", "p99 ms", True)]


def paths_from(stack):
    sim, pc = stack["sim"], stack["portcullis"]
    admin = sim["admin_token"]
    paths = {
        "direct": Path("direct", sim["url"], token=admin, ca=sim["ca_file"], pid=sim["pid"]),
        "portcullis": Path(
            "portcullis", pc["url"], pc["cluster_path"], pc["person_token"], pc["ca_file"], pid=stack["portcullis_pid"]
        ),
        "kubectl-proxy": Path("kubectl-proxy", stack["kubectl_proxy_url"], http1=True, pid=stack["kubectl_proxy_pid"]),
        "nginx": Path("nginx", stack["nginx_url"], token=admin, ca=pc["ca_file"]),
        "portcullis-redacting": Path(
            "portcullis-redacting", pc["url"], pc["cluster_path"], pc["agent_token"], pc["ca_file"]
        ),
    }
    for name, process in (
        ("portcullis", stack["portcullis_pid"]),
        ("portcullis-redacting", stack["portcullis_pid"]),
        ("kubectl-proxy", stack["kubectl_proxy_pid"]),
        ("nginx", stack["nginx_pid"]),
    ):
        paths[name].process = process
    return paths


def measured(cfg, path, target, concurrency, requests=None, rate=None):
    """One h2load run with the CPU of the path's process and the cluster's."""
    return with_cpu(path, cfg.sim_pid, lambda: h2load(path, target, concurrency, cfg.seconds, requests, rate))


def scenario_get(cfg, paths, audit):
    target = f"/api/v1/namespaces/{NS}/configmaps/small"
    for p in paths:
        check_configmap(p)
    out, tables = {}, []
    for c in cfg.concurrencies:
        def run(p, c=c):
            before = audit.rows() if p.name == "portcullis" else None
            result = measured(cfg, p, target, c, cfg.requests)
            if before is not None:
                audit.count(before, result)
            return result

        repeats = cfg.judged_repeats if c in judged(cfg.concurrencies) else cfg.repeats
        results = interleaved(paths, repeats, run)
        columns = LATENCY_COLUMNS + CPU_COLUMNS
        rows = rows_of(results, [k for k, _, _ in columns])
        tables.append(table(f"(a) GET 1 KiB ConfigMap, concurrency {c}", rows, columns))
        out[str(c)] = dict(rows)
    return out, tables


def scenario_added_latency(cfg, paths, get_results):
    """p99 at half of portcullis's best throughput, same offered rate on
    every path."""
    best = max(r["portcullis"]["rps"]["median"] for r in get_results.values())
    rate = max(best / 2, 10)
    c = 16
    results = interleaved(
        paths, cfg.repeats, lambda p: measured(cfg, p, f"/api/v1/namespaces/{NS}/configmaps/small", c, rate=rate)
    )
    columns = LATENCY_COLUMNS + CPU_COLUMNS
    rows = rows_of(results, [k for k, _, _ in columns])
    t = table(f"(a') GET at half of portcullis's best throughput ({rate:.0f} req/s offered, {c} connections)", rows, columns)
    return {"offered_rps": rate, "paths": dict(rows)}, t


def scenario_list(cfg, paths, resource, title, concurrency=4):
    for p in paths:
        check_list(p, resource, reveal=p.name != "portcullis-redacting")
    target = f"/api/v1/namespaces/{NS}/{resource}"
    # h2load needs at least one request per connection.
    requests = cfg.requests and max(cfg.requests // 10, concurrency)
    results = interleaved(paths, cfg.repeats, lambda p: measured(cfg, p, target, concurrency, requests))
    columns = [
        ("mbps", "MB/s", True),
        ("rps", "req/s", True),
        ("p50_ms", "p50 ms", True),
        ("bytes_per_response", "bytes", False),
    ] + CPU_COLUMNS
    rows = rows_of(results, [k for k, _, _ in columns])
    t = table(title, rows, columns)
    return dict(rows), t


def bench_stack(cfg, *args):
    output = subprocess.run([cfg.bin, *args], capture_output=True, text=True, timeout=900)
    if output.returncode != 0:
        raise SystemExit(f"bench_stack {args[0]} failed:\n{output.stderr}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def scenario_watch(cfg, stack, paths):
    sim = stack["sim"]
    # Tokens as `--name=value`: a random token may begin with '-', which
    # clap would otherwise read as a flag (a smoke run failed on one).
    common = ["--cluster", sim["url"], f"--cluster-token={sim['admin_token']}", "--cluster-ca", sim["ca_file"]]

    def run(p):
        args = ["watch", "--base", p.base, "--watches", str(cfg.watches), *common]
        if p.prefix:
            args += ["--prefix", p.prefix]
        if p.token:
            args.append(f"--token={p.token}")
        if p.ca:
            args += ["--ca", p.ca]
        # nginx over HTTP/1.1 too: hyper's HTTP/2 client never gets the
        # response headers of a watch through nginx 1.22 (curl's and
        # nghttp's do), so its watches get a connection each, as kubectl
        # proxy's do.
        if p.http1 or p.name == "nginx":
            args.append("--http1")
        if p.pid:
            args += ["--pid", str(p.pid)]
        result = bench_stack(cfg, *args)
        log(f"  watch {p.name}: {json.dumps(result)}")
        if result["opened"] != cfg.watches or result["delivered"] != result["opened"]:
            raise SystemExit(f"{p.name}: {result['opened']} of {cfg.watches} watches opened, {result['delivered']} got the event")
        time.sleep(2)  # let the proxies close the watches before the next path
        return {
            "kib_per_watch": result["kib_per_watch"],
            "p50_ms": result["delivery_ms"]["p50"],
            "p99_ms": result["delivery_ms"]["p99"],
            "max_ms": result["delivery_ms"]["max"],
            "open_seconds": result["open_seconds"],
        }

    results = interleaved(paths, cfg.watch_repeats, run)
    rows = []
    for name, rs in results.items():
        metrics = {k: summary(rs, k) for k in ("p50_ms", "p99_ms", "max_ms", "open_seconds")}
        kib = [r["kib_per_watch"] for r in rs if r["kib_per_watch"] is not None]
        if kib:
            metrics["kib_per_watch"] = {"median": max(kib), "min": min(kib), "max": max(kib), "runs": kib}
        rows.append((name, metrics))
    t = table(
        f"(d) {cfg.watches} open watches: delivery of one event to all, resident memory per watch "
        "(of the process on that path: the simulated cluster for direct; the largest run's value)",
        rows,
        [
            ("kib_per_watch", "KiB/watch", False),
            ("p50_ms", "p50 ms", True),
            ("p99_ms", "p99 ms", True),
            ("max_ms", "max ms", True),
            ("open_seconds", "open s", True),
        ],
    )
    return dict(rows), t


def scenario_mcp(cfg, stack, paths, get_results):
    pc = stack["portcullis"]
    runs = [
        bench_stack(cfg, "mcp", "--base", pc["url"], f"--token={pc['agent_token']}", "--ca", pc["ca_file"], "--calls", str(cfg.mcp_calls))
        for _ in range(cfg.repeats)
    ]
    rows = []
    for tool in ("get_resource", "list_resources"):
        rows.append((tool, {k: summary([r[tool] for r in runs], k) for k in ("p50", "p99")}))
    one = get_results[str(cfg.concurrencies[0])]
    rows.append(("raw GET, portcullis", {"p50": one["portcullis"]["p50_ms"], "p99": one["portcullis"]["p99_ms"]}))
    rows.append(("raw GET, direct", {"p50": one["direct"]["p50_ms"], "p99": one["direct"]["p99_ms"]}))
    # The list the tool makes, asked for raw in the same way: one at a time.
    pods = f"/api/v1/namespaces/{NS}/pods"
    raw = [measured(cfg, paths["portcullis"], pods, 1, cfg.mcp_calls) for _ in range(cfg.repeats)]
    rows.append((RAW_LIST, {"p50": summary(raw, "p50_ms"), "p99": summary(raw, "p99_ms")}))
    t = table(
        f"(e) MCP tool calls through portcullis, one at a time (ms per call; for scale, raw GETs at concurrency {cfg.concurrencies[0]} "
        "and the raw LIST of the same pods, one at a time)",
        rows,
        [("p50", "p50 ms", False), ("p99", "p99 ms", False)],
    )
    return dict(rows), t


class AuditCount:
    """Audit rows portcullis committed (its /metrics) against requests sent."""

    def __init__(self, path):
        self.path, self.sent, self.stored, self.best = path, 0, 0, 0.0

    def rows(self):
        context = ssl.create_default_context(cafile=self.path.ca)
        with urllib.request.urlopen(f"{self.path.base}/metrics", context=context, timeout=10) as r:
            text = r.read().decode()
        match = re.search(r"^portcullis_audit_rows_total (\d+)", text, re.M)
        return int(match.group(1)) if match else 0

    def count(self, before, result):
        time.sleep(0.5)  # reads are group-committed within 100 ms
        stored = self.rows() - before
        self.sent += result["succeeded"]
        self.stored += stored
        self.best = max(self.best, stored / result["seconds"] if result["seconds"] else 0)


def scenario_audit(cfg, audit):
    alone = [
        bench_stack(cfg, "audit", "--dir", cfg.work, "--rows", str(cfg.audit_rows)) for _ in range(cfg.repeats)
    ]
    for r in alone:
        if r["lost"]:
            raise SystemExit(f"audit writer lost {r['lost']} rows")
    lost = max(audit.sent - audit.stored, 0)
    rows = [
        ("writer alone", {"rps": summary(alone, "rows_per_second"), "lost": summary(alone, "lost")}),
        (
            "through portcullis",
            {
                "rps": {"median": audit.best, "min": audit.best, "max": audit.best},
                "lost": {"median": lost, "min": lost, "max": lost},
            },
        ),
    ]
    t = table(
        "(f) audit rows/s with no row lost (writer alone: fed as fast as it takes rows; through portcullis: "
        f"rows committed during the busiest GET run, {audit.sent} requests, {audit.stored} rows)",
        rows,
        [("rps", "rows/s", False), ("lost", "lost", False)],
    )
    return {"alone": alone, "through_portcullis": {"sent": audit.sent, "stored": audit.stored, "lost": lost, "best_rows_per_second": audit.best}}, t


def redaction(cfg):
    runs = [bench_stack(cfg, "redact", "--seconds", str(cfg.redact_seconds)) for _ in range(cfg.repeats)]
    rows = [("redact 500 Secrets, one core", {"mbps": summary(runs, "mb_per_second")})]
    t = table("(c') Secret redaction alone (MB of input per second, one thread)", rows, [("mbps", "MB/s", False)])
    return {"runs": runs, "mbps": rows[0][1]["mbps"]}, t


# ---------------------------------------------------------------- targets and output


def machine():
    mem_kib = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1))
    model = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu": model.group(1) if model else platform.processor(),
        "kernel": platform.release(),
    }


def markdown(info, tables, target_rows, cfg):
    out = [
        f"Run {info['date']}, commit `{info['commit']}`{build_note(cfg)}, {info['cores']} cores ({info['cpu']}), "
        f"{info['memory_gib']} GiB memory, Linux {info['kernel']}. Each cell is the median of {cfg.repeats} interleaved runs "
        f"of {cfg.seconds} s ({cfg.judged_repeats} for the small GET at {' and '.join(map(str, judged(cfg.concurrencies)))} "
        f"connections, whose CPU and throughput the targets judge; {cfg.watch_repeats} for watches); "
        f"spread is min-max; \"x direct\" is the ratio to the direct path.",
        "",
        "| target | measured | met |",
        "| --- | --- | --- |",
    ]
    out += [f"| {name} | {value} | {'yes' if ok else '**no**'} |" for name, value, ok in target_rows]
    out += markdown_tables(tables)
    return "\n".join(out)


def configure(cfg):
    """How much of each scenario: a handful of requests for the smoke run,
    minutes of load for the full one."""
    if cfg.smoke:
        cfg.repeats, cfg.seconds, cfg.requests, cfg.concurrencies = 1, 1, 20, [1, 4]
        cfg.judged_repeats = 2
        cfg.watches, cfg.watch_repeats, cfg.mcp_calls, cfg.audit_rows, cfg.redact_seconds = 50, 1, 3, 2000, 0.2
        # Two repeats: the pairing of each path's run with direct's in the
        # same repeat, which the full run's added latency rests on, is
        # exercised.
        cfg.real_concurrencies, cfg.real_repeats = [1, 4], 2
    else:
        cfg.repeats, cfg.seconds, cfg.requests, cfg.concurrencies = 3, 5, None, [1, 32, 64]
        # One run's CPU per request moves by a fifth with the machine's
        # load: three runs put portcullis at 1.34 and 1.02 times nginx's
        # where eight pairs side by side put it at 1.14 at both. The
        # verdicts rest on more runs (some six minutes more).
        cfg.judged_repeats = 8
        cfg.watches, cfg.watch_repeats, cfg.mcp_calls, cfg.audit_rows, cfg.redact_seconds = 10000, 2, 200, 200000, 3
        cfg.real_concurrencies, cfg.real_repeats = [1, 16], cfg.repeats
    return cfg


def write_markdown(cfg, info, results, tables, target_rows):
    """The generated parts of RESULTS.md: a full run rewrites them in place;
    the smoke run writes them into a copy beside its results and checks that
    everything written by hand survived."""
    target = cfg.results_md
    if cfg.smoke:
        target = os.path.join(os.path.dirname(cfg.out) or ".", "smoke-RESULTS.md")
        shutil.copyfile(cfg.results_md, target)
    write_results_md(target, markdown(info, tables, target_rows, cfg))
    write_results_md(target, real_upstream.markdown(info, results["real"], cfg), section=real_upstream.SECTION)
    write_results_md(target, postgres.markdown(info, results["postgres"], cfg), section=postgres.SECTION)
    if cfg.smoke:
        rows = {"results": real_upstream.ORDER, real_upstream.SECTION: real_upstream.ORDER, postgres.SECTION: postgres.ORDER}
        check_results_md(cfg.results_md, target, tuple(rows), rows)
        log(f"checked {target}: the generated sections written, the hand-written text around them kept")
    else:
        log(f"figures written to {target}")


def only_postgres(cfg, stack):
    """`scripts/bench --postgres`: the PostgreSQL scenarios alone, and their
    section of RESULTS.md (a full run, not the smoke run, rewrites it)."""
    log("(g, h) PostgreSQL: the audit writer alone, and two replicas on one database")
    results, _ = postgres.run(cfg, stack)
    info = machine()
    results["machine"], results["smoke"] = info, cfg.smoke
    with open(cfg.out, "w") as f:
        json.dump(results, f, indent=2)
    log(f"\nresults: {cfg.out}")
    if cfg.results_md and not cfg.smoke:
        write_results_md(cfg.results_md, postgres.markdown(info, results, cfg), section=postgres.SECTION)
        log(f"figures written to {cfg.results_md}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--bin", required=True, help="the bench_stack example binary")
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--results-md", help="RESULTS.md (the smoke run writes a copy of it)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--build", default="", help="how portcullis was built, for the sections' first lines")
    parser.add_argument("--only", choices=["postgres"], help="only these scenarios, and only their section of RESULTS.md")
    cfg = configure(parser.parse_args())
    stack = json.load(open(cfg.stack))
    cfg.sim_pid = stack["sim"]["pid"]
    if cfg.only == "postgres":
        return only_postgres(cfg, stack)
    paths = paths_from(stack)
    four = [paths[n] for n in ("direct", "portcullis", "kubectl-proxy", "nginx")]
    audit = AuditCount(paths["portcullis"])
    results, tables = {}, []

    log("(a) GET of a 1 KiB ConfigMap")
    results["get"], t = scenario_get(cfg, four, audit)
    tables += t
    log("(a') added latency at half of portcullis's best throughput")
    results["added_latency"], t = scenario_added_latency(cfg, four, results["get"])
    tables.append(t)
    log("(b) LIST of 500 pods")
    results["list_pods"], t = scenario_list(cfg, four, "pods", "(b) LIST 500 pods, 4 connections")
    tables.append(t)
    log("(r) the same GET and LIST against the real kube-apiserver")
    results["real"], _ = real_upstream.run(cfg, stack)
    log("(c) LIST of 500 Secrets")
    five = four[:2] + [paths["portcullis-redacting"]] + four[2:]
    results["list_secrets"], t = scenario_list(
        cfg, five, "secrets", "(c) LIST 500 Secrets, 4 connections: portcullis passing values (person) and redacting (agent)"
    )
    tables.append(t)
    results["redaction"], t = redaction(cfg)
    tables.append(t)
    log(f"(d) {cfg.watches} watches")
    results["watch"], t = scenario_watch(cfg, stack, four)
    tables.append(t)
    log("(e) MCP")
    results["mcp"], t = scenario_mcp(cfg, stack, paths, results["get"])
    tables.append(t)
    log("(f) audit")
    results["audit"], t = scenario_audit(cfg, audit)
    tables.append(t)
    log("(g, h) PostgreSQL: the audit writer alone, and two replicas on one database")
    results["postgres"], _ = postgres.run(cfg, stack)

    target_rows = targets(results)
    print("\nTargets (issue 23)")
    for name, value, ok in target_rows:
        print(f"  {'met    ' if ok else 'NOT MET'}  {name}: {value}")
    info = machine()
    results["machine"], results["smoke"] = info, cfg.smoke
    results["targets"] = [{"target": n, "measured": v, "met": ok} for n, v, ok in target_rows]
    results["tables"] = tables
    with open(cfg.out, "w") as f:
        json.dump(results, f, indent=2)
    log(f"\nresults: {cfg.out}")
    if cfg.results_md:
        write_markdown(cfg, info, results, tables, target_rows)


if __name__ == "__main__":
    main()
