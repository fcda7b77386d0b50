"""Issue 23's targets, read from a full run's results (benches/run.py).

Each is a ratio within the one run, so the machine's speed that hour
cancels out. The instructions per GET are counted apart, by
benches/callgrind.py, and judged in its own section of RESULTS.md.
"""

import statistics

# The MCP scenario's row for the LIST that `list_resources` makes, asked
# for raw through portcullis in the same way (one request at a time).
RAW_LIST = "raw LIST of 500 pods, portcullis"


def judged(concurrencies):
    """The small GET's concurrencies whose CPU and throughput the targets
    judge: the issue names 32 and 64 connections; the smoke run has
    neither, so it checks its largest instead."""
    return [c for c in concurrencies if int(c) >= 32] or [max(concurrencies, key=int)]


def targets(results):
    """Issue 23's targets, each as (target, what this run measured, met).
    The instructions per GET are the callgrind section's, counted apart."""
    get = results["get"]
    many = judged(list(get))
    rows = []
    for c in many:
        pc, ng = get[c]["portcullis"], get[c]["nginx"]
        cpu, ng_cpu = pc["cpu_ms"]["median"], ng["cpu_ms"]["median"]
        rows.append((
            f"small GET, {c} connections: CPU per 1000 requests <= nginx's",
            f"{cpu:.1f} vs {ng_cpu:.1f} ms ({ratio(cpu, ng_cpu, 1)} x)",
            # Nothing is met by a run too short to read any CPU time.
            0 < ng_cpu and cpu <= ng_cpu,
        ))
    for c in many:
        rps, ng_rps = get[c]["portcullis"]["rps"]["median"], get[c]["nginx"]["rps"]["median"]
        rows.append((
            f"small GET, {c} connections: throughput >= nginx's",
            f"{rps:.0f} vs {ng_rps:.0f} req/s ({ratio(rps, ng_rps, 2)})",
            rps >= ng_rps,
        ))
    added = results["added_latency"]["paths"]
    direct_p99 = added["direct"]["p99_ms"]["median"]
    added_p99 = added["portcullis"]["p99_ms"]["median"] - direct_p99
    nginx_added = added["nginx"]["p99_ms"]["median"] - direct_p99
    rows.append((
        "added p99 < 1 ms at half of portcullis's best rate",
        f"{added_p99:+.2f} ms ({added['portcullis']['p99_ms']['median']:.2f} vs direct {direct_p99:.2f}; nginx {nginx_added:+.2f})",
        added_p99 < 1.0,
    ))
    secrets = results["list_secrets"]
    redacted, passed = secrets["portcullis-redacting"]["rps"]["median"], secrets["portcullis"]["rps"]["median"]
    rows.append((
        "LIST of 500 Secrets redacted >= 0.8 of the same passed unredacted (req/s)",
        f"{redacted:.0f} vs {passed:.0f} req/s ({ratio(redacted, passed, 2)})",
        redacted >= 0.8 * passed,
    ))
    mcp = results["mcp"]
    tool, raw = mcp["list_resources"]["p50"]["median"], mcp[RAW_LIST]["p50"]["median"]
    rows.append((
        "MCP list_resources of 500 pods: p50 < the raw LIST's + 5 ms (one at a time)",
        f"{tool:.2f} vs {raw:.2f} ms ({tool - raw:+.2f})",
        tool < raw + 5,
    ))
    watch = results["watch"]
    kib = watch.get("portcullis", {}).get("kib_per_watch", {}).get("median")
    rows.append((
        "open watches: < 32 KiB resident each",
        f"{kib:.1f} KiB" if kib is not None else "not measured",
        kib is not None and kib < 32,
    ))
    delivery, direct_delivery = watch["portcullis"]["p99_ms"]["median"], watch["direct"]["p99_ms"]["median"]
    rows.append((
        "one event to every watch: p99 within 1.5 x direct",
        f"{delivery:.1f} vs {direct_delivery:.1f} ms ({ratio(delivery, direct_delivery, 2)} x)",
        delivery <= 1.5 * direct_delivery,
    ))
    writer = results["audit"]["alone"]
    writer_rps = statistics.median(r["rows_per_second"] for r in writer)
    best = max(get[c]["portcullis"]["rps"]["median"] for c in get)
    lost = results["audit"]["through_portcullis"]["lost"]
    rows.append((
        "every request is one audit row: the writer keeps up, no row lost",
        f"{writer_rps:.0f} rows/s alone vs {best:.0f} req/s; {lost} lost",
        writer_rps >= best and lost == 0,
    ))
    return rows


def ratio(a, b, digits):
    """a / b, or "-" where b is 0 (a smoke run's runs are too short to
    show any CPU time)."""
    return f"{a / b:.{digits}f}" if b else "-"
