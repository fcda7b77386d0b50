#!/usr/bin/env python3
"""Instructions per small GET, counted by callgrind (`scripts/bench
--callgrind`, and the end of a full run): unlike a rate or a CPU time they
do not move with what else the machine runs, so a regression shows even on
a noisy machine.

Each proxy runs alone under `valgrind --tool=callgrind` in front of the
simulated cluster (which runs natively): `portcullis serve` with the
benchmark's configuration on a fresh copy of the store `bench_stack setup`
wrote; nginx as one process (`master_process off`, one worker's work);
kubectl proxy. Then:

1. a fixed warm-up, WARMUP GETs of the 1 KiB ConfigMap (h2load, 4
   connections), and portcullis's audit rows for them committed;
2. the counters zeroed (`callgrind_control -z`);
3. N GETs over 4 new connections (h2load; HTTP/1.1 to kubectl proxy), and
   portcullis's audit rows for them committed (polled on its /metrics);
4. the counters dumped (`callgrind_control -d`).

Instructions per GET are the dump's total (every thread, all the process
did in that interval: the 4 TLS handshakes, the audit writer, timers) over
N; only the start and the warm-up are left out. Each process is started
afresh for each run, so two runs show how stable the figure is.
"""

import argparse
import datetime
import glob
import json
import os
import re
import shutil
import ssl
import statistics
import subprocess
import time
import urllib.request

from measure import NS, Path, answering, build_note, h2load, log, stop, write_results_md

TARGET = f"/api/v1/namespaces/{NS}/configmaps/small"
SECTION = "callgrind"
# The paths issue 23's target compares: a failed count of either fails
# the run; the others are references.
TARGETS = ("portcullis", "nginx")
CONNECTIONS = 4


def start(name, command, out_dir, env=None):
    """`command` under callgrind; its output and valgrind's in out_dir."""
    out_file = os.path.join(out_dir, f"{name}.callgrind")
    valgrind = [
        "valgrind",
        "--tool=callgrind",
        "--dump-instr=no",
        f"--callgrind-out-file={out_file}",
        f"--log-file={out_dir}/{name}.valgrind.log",
    ]
    process = subprocess.Popen(
        valgrind + command,
        env={**os.environ, **(env or {})},
        stdout=open(os.path.join(out_dir, f"{name}.log"), "w"),
        stderr=subprocess.STDOUT,
    )
    return process, out_file


def control(option, pid):
    subprocess.run(["callgrind_control", option, str(pid)], check=True, capture_output=True, timeout=300)


def total_instructions(dump):
    text = open(dump).read()
    match = re.search(r"^(?:totals|summary):\s*(\d+)", text, re.M)
    if not match:
        raise SystemExit(f"{dump}: no total")
    return int(match.group(1))


def audit_rows(path):
    context = ssl.create_default_context(cafile=path.ca)
    with urllib.request.urlopen(f"{path.base}/metrics", context=context, timeout=60) as r:
        match = re.search(r"^portcullis_audit_rows_total (\d+)", r.read().decode(), re.M)
    return int(match.group(1)) if match else 0


def committed(path, at_least, seconds=120):
    """Wait until portcullis has committed `at_least` audit rows: their
    commit is part of the requests' cost."""
    deadline = time.monotonic() + seconds
    while (rows := audit_rows(path)) < at_least:
        if time.monotonic() > deadline:
            raise SystemExit(f"audit rows {rows} < {at_least} after {seconds} s")
        time.sleep(0.5)
    return rows


def count(cfg, name, command, path, ready_paths, env=None, audited=False, run=1):
    """One run: start, warm up, zero, N GETs, dump; instructions per GET."""
    out_dir = os.path.join(cfg.out_dir, f"{name}-{run}")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    process, out_file = start(name, command, out_dir, env)
    try:
        # valgrind starts slowly
        answering(process, ready_paths, TARGET, 600, interval=1, where=" under callgrind")
        rows = audit_rows(path) if audited else 0
        h2load(path, TARGET, CONNECTIONS, None, requests=cfg.warmup)
        if audited:
            rows = committed(path, rows + cfg.warmup)
        control("-z", process.pid)
        began = time.monotonic()
        h2load(path, TARGET, CONNECTIONS, None, requests=cfg.requests)
        if audited:
            committed(path, rows + cfg.requests)
        seconds = time.monotonic() - began
        control("-d", process.pid)
        dumps = sorted(glob.glob(f"{out_file}.*"))
        if not dumps:
            raise SystemExit(f"{name}: callgrind_control -d wrote no dump in {out_dir}")
        total = total_instructions(dumps[-1])
    finally:
        stop(process, 120)  # valgrind ends slowly
    per_get = total / cfg.requests
    log(f"  {name} run {run}: {total} instructions over {cfg.requests} GETs in {seconds:.1f} s: {per_get:.0f} per GET")
    return {"instructions": total, "per_get": per_get, "seconds": seconds, "dump": dumps[-1]}


def annotate(dump, out):
    """callgrind_annotate's inclusive costs, beside the dump, for reading."""
    text = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=99.5", dump], capture_output=True, text=True, check=True
    ).stdout
    open(out, "w").write(text)


def targets(cfg, stack):
    """(name, command, path, paths to wait for, env, audited) per proxy."""
    sim, pc = stack["sim"], stack["portcullis"]
    person = lambda prefix: Path("portcullis", pc["url"], prefix, pc["person_token"], pc["ca_file"])
    out = [
        (
            "portcullis",
            [cfg.portcullis, "serve", "--config", pc["config"]],
            person(pc["cluster_path"]),
            # Ready once the reconciler has bound the person's grants in
            # both clusters, as the full run waits for it.
            [person(pc["cluster_path"]), person(pc["real_cluster_path"])],
            {"PORTCULLIS_LOG": os.environ.get("PORTCULLIS_LOG", "info")},
            True,
        )
    ]
    if cfg.nginx_conf:
        nginx = Path("nginx", cfg.nginx_url, token=sim["admin_token"], ca=pc["ca_file"])
        command = ["nginx", "-c", cfg.nginx_conf, "-p", cfg.nginx_prefix]
        out.append(("nginx", command, nginx, [nginx], None, False))
    if cfg.kubectl:
        port = free_port()
        kubectl = Path("kubectl-proxy", f"http://127.0.0.1:{port}", http1=True)
        command = [cfg.kubectl, "proxy", "--kubeconfig", sim_kubeconfig(cfg), "--address", "127.0.0.1", "--port", str(port)]
        # Go's preemption signals trip an assertion in callgrind's signal
        # handling (valgrind 3.19); goroutines still yield at calls.
        out.append(("kubectl-proxy", command, kubectl, [kubectl], {"GODEBUG": "asyncpreemptoff=1"}, False))
    return out


def sim_kubeconfig(cfg):
    return os.path.join(cfg.work, "admin.kubeconfig")


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fresh_store(cfg, run):
    """A copy of the store as `setup` left it: every run starts from the
    same one, whatever earlier runs audited."""
    data = os.path.join(cfg.work, f"callgrind-data-{run}")
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(cfg.store, data)
    return data


def markdown(info, results, cfg):
    runs = max(len(r) for r in results.values())
    changed = info["uncommitted"]
    commit = f"`{info['commit']}`" + (f" with uncommitted changes to {', '.join(changed)}" if changed else "")
    lines = [
        f"Run {info['date']}, commit {commit}{build_note(cfg)}; {info['valgrind']}, {info['nginx']}. Instructions per GET of the 1 KiB "
        f"ConfigMap: after {cfg.warmup} GETs of warm-up, {cfg.requests} GETs over {CONNECTIONS} new connections "
        "(h2load: HTTP/2 over TLS; HTTP/1.1 to kubectl proxy), the process's total instructions (every thread, "
        "audit commits, TLS handshakes and timers included) over the GETs. Each run starts the process afresh "
        "(portcullis on a copy of the same store).",
        "",
        "| path | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " | spread |",
        "| --- |" + " --- |" * (runs + 1),
    ]
    for name, rs in results.items():
        per = [r["per_get"] for r in rs if "per_get" in r]
        spread = f"{(max(per) - min(per)) / min(per) * 100:.2f}%" if len(per) > 1 else "-"
        lines.append(f"| {name} | " + " | ".join(per_get_cell(r) for r in rs) + f" | {spread} |")
    lines += ["", target_line(results)]
    return "\n".join(lines)


def target_line(results):
    """Issue 23's target for this count: at most 1.5 times nginx's."""
    medians = {}
    for name in TARGETS:
        per = [r["per_get"] for r in results.get(name, []) if "per_get" in r]
        if not per:
            return f"Target (issue 23), at most 1.5 x nginx's count: not judged, {name} was not counted."
        medians[name] = statistics.median(per)
    ratio = medians["portcullis"] / medians["nginx"]
    met = "met" if ratio <= 1.5 else "**not met**"
    return f"Target (issue 23), at most 1.5 x nginx's count: {ratio:.2f} x, {met}."


def per_get_cell(result):
    return f"{result['per_get']:,.0f}" if "per_get" in result else "not counted"


def machine():
    def output(*command):
        done = subprocess.run(command, capture_output=True, text=True)
        return done.stdout + done.stderr

    commit = output("git", "rev-parse", "--short", "HEAD").strip()
    # What the counts depend on: the proxy's own sources, not the bench's.
    dirty = output("git", "status", "--porcelain", "--", "src", "sim", "Cargo.toml", "Cargo.lock").splitlines()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "uncommitted": sorted(line[3:] for line in dirty),
        "valgrind": output("valgrind", "--version").strip(),
        "nginx": output("nginx", "-v").strip().removeprefix("nginx version: "),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True, help="bench-stack.json (sim and portcullis are read)")
    parser.add_argument("--portcullis", required=True, help="the portcullis binary")
    parser.add_argument("--store", required=True, help="portcullis's data directory as setup wrote it")
    parser.add_argument("--work", required=True)
    parser.add_argument("--nginx-conf", help="an nginx configuration with master_process off, one server")
    parser.add_argument("--nginx-prefix")
    parser.add_argument("--nginx-url")
    parser.add_argument("--kubectl", help="kubectl, to count kubectl proxy too")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--out", required=True, help="JSON results; dumps and annotations beside it")
    parser.add_argument("--results-md", help="RESULTS.md, whose callgrind section is rewritten")
    parser.add_argument("--build", default="", help="how portcullis was built, for the section's first line")
    cfg = parser.parse_args()
    cfg.out_dir = os.path.join(os.path.dirname(cfg.out) or ".", "callgrind")
    os.makedirs(cfg.out_dir, exist_ok=True)
    stack = json.load(open(cfg.stack))
    info = machine()  # before the runs: the sources the binary was built from
    results = {}
    for name, command, path, ready_paths, env, audited in targets(cfg, stack):
        results[name] = []
        for run in range(1, cfg.runs + 1):
            if audited:
                env = {**env, "PORTCULLIS_DATA_DIR": fresh_store(cfg, run)}
            try:
                results[name].append(count(cfg, name, command, path, ready_paths, env, audited, run))
            except (SystemExit, Exception) as e:
                if name in TARGETS:
                    raise
                # kubectl proxy is a reference, and Go's collector can make
                # it so slow under valgrind that the cluster gives up on a
                # request: say so rather than lose the targets' counts.
                log(f"  {name} run {run}: not counted: {e}")
                results[name].append({"failed": str(e)})
        counted = [r for r in results[name] if "dump" in r]
        if counted:
            annotate(counted[0]["dump"], os.path.join(cfg.out_dir, f"{name}-inclusive.txt"))
    print("\nInstructions per small GET (callgrind)")
    for name, rs in results.items():
        print(f"  {name:14} " + "  ".join(per_get_cell(r).rjust(12) for r in rs))
    with open(cfg.out, "w") as f:
        json.dump({"machine": info, "warmup": cfg.warmup, "requests": cfg.requests, "results": results}, f, indent=2)
    log(f"results: {cfg.out}; dumps and callgrind_annotate --inclusive=yes in {cfg.out_dir}")
    if cfg.results_md:
        write_results_md(cfg.results_md, markdown(info, results, cfg), section=SECTION)
        log(f"figures written to {cfg.results_md}")


if __name__ == "__main__":
    main()
