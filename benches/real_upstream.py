"""The small-GET and 500-pod LIST scenarios against the real kube-apiserver
(`bench_stack real`): direct, through portcullis, kubectl proxy and nginx,
interleaved as the simulated cluster's are, with the latency each path adds
over direct and the CPU that each path's process and kube-apiserver spend
per request.
"""

import time

from measure import NS, Path, check_configmap, check_list, h2load, interleaved, log
from measure import markdown_tables, named_below, rows_of, table, with_cpu

ORDER = ("direct", "portcullis", "kubectl-proxy", "nginx")
# The markers of this section in RESULTS.md.
SECTION = "real-results"
LIST_CONNECTIONS = 4


def paths_from(stack):
    """The four ways to the real cluster, in the order they interleave."""
    real, pc = stack["real"], stack["portcullis"]
    admin = real["admin_token"]
    paths = {
        "direct": Path("direct", real["url"], token=admin, ca=real["ca_file"]),
        "portcullis": Path("portcullis", pc["url"], pc["real_cluster_path"], pc["person_token"], pc["ca_file"]),
        "kubectl-proxy": Path("kubectl-proxy", stack["real_kubectl_proxy_url"], http1=True),
        "nginx": Path("nginx", stack["real_nginx_url"], token=admin, ca=pc["ca_file"]),
    }
    paths["portcullis"].process = stack["portcullis_pid"]
    paths["kubectl-proxy"].process = stack["real_kubectl_proxy_pid"]
    paths["nginx"].process = stack["nginx_pid"]
    return [paths[n] for n in ORDER]


def check_real(path):
    """The path reaches the real cluster: the ConfigMap, and 500 pods that
    are Pending (the simulator's say Running; nothing schedules these)."""
    check_configmap(path)
    check_list(path, "pods", reveal=True)
    pod = path.fetch(f"/api/v1/namespaces/{NS}/pods/web-0000")
    if pod.get("status", {}).get("phase") != "Pending":
        raise SystemExit(f"{path.name}: web-0000 is not the real cluster's Pending pod: {pod.get('status')}")
    log(f"  checked {path.name}: ConfigMap small, LIST of 500 pods, Pending as the real API server has them")


def measured(path, api_server, target, concurrency, cfg, requests):
    """One h2load run, with the CPU the path's processes and kube-apiserver
    used, in ms per 1000 requests."""
    return with_cpu(path, api_server, lambda: h2load(path, target, concurrency, cfg.seconds, requests))


def with_added(results):
    """Each path's p50 and p99 less direct's in the same repeat: the runs
    interleave, so a repeat's pair saw the same machine."""
    for name, runs in results.items():
        if name == "direct":
            continue
        for run, base in zip(runs, results["direct"]):
            run["added_p50_ms"] = run["p50_ms"] - base["p50_ms"]
            run["added_p99_ms"] = run["p99_ms"] - base["p99_ms"]
    return results


LATENCY_COLUMNS = [
    ("p50_ms", "p50 ms", False),
    ("added_p50_ms", "+p50 ms", False),
    ("p99_ms", "p99 ms", False),
    ("added_p99_ms", "+p99 ms", False),
    ("cpu_ms", "path CPU ms/1000 req", False),
    ("upstream_cpu_ms", "kube-apiserver CPU ms/1000 req", False),
]


def scenario(cfg, paths, api_server, title, target, concurrency, requests, extra_columns):
    results = with_added(
        interleaved(paths, cfg.real_repeats, lambda p: measured(p, api_server, target, concurrency, cfg, requests))
    )
    columns = extra_columns + LATENCY_COLUMNS
    rows = rows_of(results, [c[0] for c in columns])
    return dict(rows), table(title, rows, columns)


def run(cfg, stack):
    """Every real-upstream scenario; returns (results, tables)."""
    began = time.monotonic()
    paths = paths_from(stack)
    for p in paths:
        check_real(p)
    api_server = named_below(stack["real"]["pid"], "kube-apiserver")
    out = {"control_plane": {k: stack["real"][k] for k in ("started_seconds", "objects_seconds")}, "get": {}}
    tables = []
    for c in cfg.real_concurrencies:
        log(f"(r) real kube-apiserver: GET of a 1 KiB ConfigMap, concurrency {c}")
        out["get"][str(c)], t = scenario(
            cfg,
            paths,
            api_server,
            f"(r-a) real kube-apiserver: GET 1 KiB ConfigMap, concurrency {c}",
            f"/api/v1/namespaces/{NS}/configmaps/small",
            c,
            cfg.requests,
            [("rps", "req/s", True)],
        )
        tables.append(t)
    log("(r) real kube-apiserver: LIST of 500 pods")
    out["list_pods"], t = scenario(
        cfg,
        paths,
        api_server,
        f"(r-b) real kube-apiserver: LIST 500 pods, {LIST_CONNECTIONS} connections",
        f"/api/v1/namespaces/{NS}/pods",
        LIST_CONNECTIONS,
        # h2load needs at least one request per connection.
        cfg.requests and max(cfg.requests // 10, LIST_CONNECTIONS),
        [("mbps", "MB/s", True), ("rps", "req/s", True), ("bytes_per_response", "bytes", False)],
    )
    tables.append(t)
    out["added"] = added(out)
    summary_table = added_table(out["added"])
    out["tables"] = [summary_table] + tables
    log(f"(r) real kube-apiserver scenarios done in {time.monotonic() - began:.1f} s")
    return out, out["tables"]


def added(out):
    """{scenario: {path: {added_p50_ms, added_p99_ms}}}, medians."""
    scenarios = {f"GET, concurrency {c}": rows for c, rows in out["get"].items()}
    scenarios["LIST 500 pods"] = out["list_pods"]
    return {
        scenario: {
            name: {k: metrics[k]["median"] for k in ("added_p50_ms", "added_p99_ms")}
            for name, metrics in rows.items()
            if name != "direct"
        }
        for scenario, rows in scenarios.items()
    }


def added_table(added_by_scenario):
    print("\n(r) latency added over direct, real kube-apiserver (ms; median of the paired differences)")
    header = ["path"] + [f"{s} {q}" for s in added_by_scenario for q in ("+p50", "+p99")]
    rows = []
    for name in ORDER[1:]:
        row = [name]
        for by_path in added_by_scenario.values():
            row += [f"{by_path[name]['added_p50_ms']:+.2f}", f"{by_path[name]['added_p99_ms']:+.2f}"]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  " + "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return {"title": "Latency added over direct (ms)", "header": header, "rows": rows}


def markdown(info, out, cfg):
    """The generated part of RESULTS.md's real-upstream section."""
    plane = out["control_plane"]
    lines = [
        f"Run {info['date']}, commit `{info['commit']}`, the same machine and run as above. kube-apiserver v1.37.2 "
        f"with etcd and kube-controller-manager as `tests/it/real/cluster.rs` starts them (ready in "
        f"{plane['started_seconds']:.1f} s; the 501 objects created in {plane['objects_seconds']:.1f} s). "
        f"Each cell is the median of {cfg.real_repeats} interleaved runs of {cfg.seconds} s; spread is min-max. "
        "\"+p50\" and \"+p99\" are a path's figure less direct's in the same repeat; \"path CPU\" is the CPU of "
        "the path's own process (nginx: master and workers), \"kube-apiserver CPU\" the API server's, in ms per 1000 requests.",
    ]
    return "\n".join(lines + markdown_tables(out["tables"]))
