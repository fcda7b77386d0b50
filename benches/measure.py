"""What every scenario of benches/run.py measures with: the paths, h2load
and its output, the statistics and tables, each path's answer checked, and
the generated parts of benches/RESULTS.md.
"""

import base64
import json
import os
import re
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

NS = "bench"

def log(message):
    print(message, file=sys.stderr, flush=True)


class Path:
    """One way to reach a cluster."""

    def __init__(self, name, base, prefix="", token=None, ca=None, http1=False, pid=None):
        self.name, self.base, self.prefix = name, base, prefix
        self.token, self.ca, self.http1, self.pid = token, ca, http1, pid
        # The process (with its children: nginx's workers) that is the path
        # itself, whose CPU a scenario may count; None for direct.
        self.process = None

    def url(self, path):
        return f"{self.base}{self.prefix}{path}"

    def headers(self):
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def fetch(self, path):
        """GET with urllib (HTTP/1.1), verifying TLS; returns parsed JSON."""
        context = ssl.create_default_context(cafile=self.ca) if self.ca else None
        request = urllib.request.Request(self.url(path), headers=self.headers())
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            if response.status != 200:
                raise SystemExit(f"{self.name}: GET {path} answered {response.status}")
            return json.load(response)


# ---------------------------------------------------------------- h2load


def build_note(cfg):
    """How portcullis was built (scripts/bench's --build), for a section's
    first line."""
    return f", portcullis {cfg.build}" if cfg.build else ""


def h2load(path, target, concurrency, seconds, requests=None, rate=None):
    """One h2load run; returns requests/s, MB/s, latency percentiles (ms)."""
    with tempfile.NamedTemporaryFile(prefix="h2load-", suffix=".log", delete=False) as f:
        logfile = f.name
    command = ["h2load", "-c", str(concurrency), "-m", "1", "-t", "1", f"--log-file={logfile}"]
    if requests:
        command += ["-n", str(requests)]
    else:
        command += ["-D", str(seconds), "--warm-up-time", "1"]
    if rate:
        command += [f"--rps={rate / concurrency:.3f}"]
    if path.http1:
        command.append("--h1")
    for name, value in path.headers().items():
        command += ["-H", f"{name}: {value}"]
    command.append(path.url(target))
    output = subprocess.run(command, capture_output=True, text=True, timeout=600).stdout
    try:
        result = parse_h2load(output, logfile)
    finally:
        os.unlink(logfile)
    if result["succeeded"] == 0 or result["non_2xx"] or result["failed"]:
        raise SystemExit(f"{path.name}: h2load {target}: not every request answered 2xx\n{output}")
    return result


def parse_h2load(output, logfile):
    def grab(pattern, cast=float):
        match = re.search(pattern, output)
        if not match:
            raise SystemExit(f"h2load output not understood ({pattern}):\n{output}")
        return cast(match.group(1))

    durations = []
    with open(logfile) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 3 and fields[1].startswith("2"):
                durations.append(int(fields[2]) / 1000.0)
    durations.sort()
    finished = grab(r"finished in ([\d.]+)(?:s|ms)")
    if re.search(r"finished in [\d.]+ms", output):
        finished /= 1000.0
    match = re.search(r"traffic:.*\n", output)
    data_bytes = 0
    if match:
        numbers = re.findall(r"\((\d+)\)", match.group(0))
        data_bytes = int(numbers[-1]) if numbers else 0
    succeeded = grab(r"(\d+) succeeded", int)
    non_2xx = sum(int(n) for n in re.findall(r"(\d+) [345]xx", output))
    rps = grab(r"([\d.]+) req/s")
    # In a timed run, "finished in" and the data bytes both include the
    # warm-up, while the request counts and req/s leave it out: bytes per
    # response is the byte rate over the request rate, not bytes over
    # requests counted.
    byte_rate = data_bytes / finished if finished else 0.0
    return {
        "rps": rps,
        "mbps": byte_rate / 1e6,
        "bytes_per_response": byte_rate / rps if rps else 0,
        "p50_ms": pct(durations, 0.50),
        "p99_ms": pct(durations, 0.99),
        "succeeded": succeeded,
        "started": grab(r"(\d+) started", int),
        "failed": grab(r"(\d+) failed", int) + grab(r"(\d+) errored", int),
        "non_2xx": non_2xx,
        "seconds": finished,
    }


def pct(sorted_values, q):
    if not sorted_values:
        return 0.0
    return sorted_values[round((len(sorted_values) - 1) * q)]


# ---------------------------------------------------------------- statistics


def summary(runs, key):
    values = [r[key] for r in runs]
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": values,
    }


def rows_of(results, keys):
    """[(path, {metric: summary})] of the metrics every run of a path has
    (direct has no added latency and no process of its own)."""
    rows = []
    for name, runs in results.items():
        present = [k for k in keys if all(r.get(k) is not None for r in runs)]
        rows.append((name, {k: summary(runs, k) for k in present}))
    return rows


def table(title, rows, columns):
    """rows: [(path, {metric: summary})]; columns: [(metric, label, ratio?)]"""
    print(f"\n{title}")
    header = ["path"]
    for _, label, ratio in columns:
        header += [label, "spread"] + (["x direct"] if ratio else [])
    lines = [header]
    direct = dict(rows).get("direct")
    for name, metrics in rows:
        line = [name]
        for metric, _, ratio in columns:
            s = metrics.get(metric)
            if s is None:
                line += ["-", "-"] + (["-"] if ratio else [])
                continue
            # "to" where a hyphen would read as a minus sign (added latency).
            between = " to " if s["min"] < 0 else "-"
            line += [fmt(s["median"]), f"{fmt(s['min'])}{between}{fmt(s['max'])}"]
            if ratio:
                base = direct and direct.get(metric)
                line.append(f"{s['median'] / base['median']:.2f}" if base and base["median"] else "-")
        lines.append(line)
    widths = [max(len(str(l[i])) for l in lines) for i in range(len(header))]
    for l in lines:
        print("  " + "  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(l, widths))))
    return {"title": title, "header": header, "rows": lines[1:]}


def fmt(value):
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


# ---------------------------------------------------------------- scenarios


def check_configmap(path):
    body = path.fetch(f"/api/v1/namespaces/{NS}/configmaps/small")
    if body.get("metadata", {}).get("name") != "small" or len(body["data"]["payload"]) < 800:
        raise SystemExit(f"{path.name}: the ConfigMap is not what was stored")


def check_list(path, resource, reveal):
    body = path.fetch(f"/api/v1/namespaces/{NS}/{resource}")
    items = body.get("items", [])
    if len(items) != 500:
        raise SystemExit(f"{path.name}: LIST {resource} returned {len(items)} items, not 500")
    if resource == "secrets":
        value = items[0]["data"]["password"]
        redacted = value.startswith("<redacted")
        if redacted == reveal:
            raise SystemExit(f"{path.name}: Secret values {'hidden' if redacted else 'shown'} against its promise")
        if reveal and not base64.b64decode(value).startswith(b"password-"):
            raise SystemExit(f"{path.name}: Secret value altered")


def interleaved(paths, repeats, run):
    """Run `run(path)` for A B C D, A B C D, ...; returns {name: [results]}."""
    results = {p.name: [] for p in paths}
    for r in range(repeats):
        for p in paths:
            results[p.name].append(run(p))
    return results


def markdown_tables(tables):
    """The tables `table` printed, as Markdown lines."""
    out = []
    for t in tables:
        out += ["", f"**{t['title']}**", "", "| " + " | ".join(t["header"]) + " |", "|" + " --- |" * len(t["header"])]
        out += ["| " + " | ".join(str(c) for c in row) + " |" for row in t["rows"]]
    return out


def write_results_md(path, generated, section="results"):
    """Put `generated` between the `<!-- {section}:start/end -->` markers of
    `path`, keeping everything around them (the analysis is by hand)."""
    start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
    if start not in text:
        text = text.rstrip("\n") + f"\n\n{start}\n{end}\n"
    before, rest = text.split(start, 1)
    after = rest.split(end, 1)[1]
    open(path, "w").write(f"{before}{start}\n{generated}\n{end}{after}")


def outside(text, sections):
    """`text` with what lies between each section's markers left out."""
    for section in sections:
        before, rest = text.split(f"<!-- {section}:start -->", 1)
        text = before + rest.split(f"<!-- {section}:end -->", 1)[1]
    return text


def check_results_md(original, written, sections, paths):
    """The generated sections are there, name every path (`paths`, or
    `paths[section]`: a section's own rows), and the rest of the file is as
    it was."""
    old, new = open(original).read(), open(written).read()
    for section in sections:
        inside = new.split(f"<!-- {section}:start -->", 1)[1].split(f"<!-- {section}:end -->", 1)[0]
        names = paths[section] if isinstance(paths, dict) else paths
        missing = [p for p in names if f"| {p} |" not in inside]
        if missing:
            raise SystemExit(f"{written}: section {section} has no row for {', '.join(missing)}")
    if outside(old, sections) != outside(new, sections):
        raise SystemExit(f"{written}: the text outside the generated sections changed")


def answering(process, paths, target, seconds, interval=0.1, where=""):
    """Wait until each path answers a GET of `target` (a server starting,
    the reconciler binding the person's grant); fail if `process` exits
    first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    for path in paths:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"{path.name} exited{where} (status {process.returncode})")
            try:
                path.fetch(target)
                break
            except Exception as e:  # not listening yet, or not reconciled yet
                if time.monotonic() > deadline:
                    raise SystemExit(f"{path.name} did not answer{where} within {seconds} s: {e}")
                time.sleep(interval)


def stop(process, seconds=30):
    """SIGTERM, then SIGKILL if `process` has not exited within `seconds`."""
    process.terminate()
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# ---------------------------------------------------------------- CPU per process


def process_tree(pid):
    """`pid` and every process below it (nginx's workers under its master)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            # The command name may hold spaces: fields start after its ")".
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    return tree


def named_below(pid, name):
    """The process called `name` under `pid` (kube-apiserver under the
    bench_stack process that supervises it)."""
    for p in process_tree(pid):
        try:
            if open(f"/proc/{p}/comm").read().strip() == name:
                return p
        except OSError:
            continue
    raise SystemExit(f"no {name} process under {pid}")


def cpu_seconds(pids):
    """User and system CPU seconds the processes have used so far (every
    thread of each)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in pids:
        try:
            fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a worker that has gone
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def with_cpu(path, upstream, run):
    """`run()` (one h2load run) with the CPU that the path's own processes
    (`path.process` and its children) and the upstream's process spent on it,
    in ms per 1000 requests: CPU over the run's wall time (cores busy) over
    its request rate, so that h2load's warm-up, which the rate leaves out,
    counts on neither side. None where there is no such process (direct)."""
    own = process_tree(path.process) if path.process else []
    up = [upstream] if upstream else []
    own_before, up_before, began = cpu_seconds(own), cpu_seconds(up), time.monotonic()
    result = run()
    wall = time.monotonic() - began

    def per_1000(pids, before):
        if not pids or not result["rps"]:
            return None
        return 1e6 * (cpu_seconds(pids) - before) / wall / result["rps"]

    result["cpu_ms"] = per_1000(own, own_before)
    result["upstream_cpu_ms"] = per_1000(up, up_before)
    return result
