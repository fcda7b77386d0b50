#!/usr/bin/env python3
"""Side by side, in pairs: the small GET's CPU and rate through portcullis
and through nginx (or through another portcullis build), run by
`scripts/bench --pairs`.

One full run's cell moves by a fifth with the hour on a shared machine
(benches/RESULTS.md). Pairs run back to back, their order alternated (A B,
B A, ...), see the same hour: the median of the pairs' ratios, and how many
pairs each side won, say which costs less where one run cannot. Each
portcullis run is a fresh `portcullis serve` on a fresh copy of the store
that setup left, so no run inherits the audit rows of the one before; nginx
runs throughout, as scripts/bench started it.

CPU is the path's own processes' (portcullis serve; nginx's master and
workers) from /proc, per 1000 requests, as benches/run.py counts it; the
simulated cluster's beside it.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess

from measure import NS, Path, answering, check_configmap, h2load, log, stop, with_cpu

TARGET = f"/api/v1/namespaces/{NS}/configmaps/small"


class Portcullis:
    """A portcullis build, started afresh for each run."""

    def __init__(self, name, binary, cfg, stack):
        self.name, self.binary, self.cfg = name, binary, cfg
        self.path = Path(name, stack["url"], stack["cluster_path"], stack["person_token"], stack["ca_file"])

    def measure(self, concurrency):
        data = os.path.join(self.cfg.work, "data")
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(self.cfg.store, data, symlinks=True)
        log_file = open(os.path.join(self.cfg.work, f"pairs-{self.name}.log"), "w")
        process = subprocess.Popen([self.binary, "serve", "--config", self.cfg.config], stderr=log_file)
        try:
            self.path.process = process.pid
            answering(process, [self.path], TARGET, 60)
            check_configmap(self.path)
            return measured(self.cfg, self.path, concurrency)
        finally:
            stop(process)
            log_file.close()


class Nginx:
    """nginx as scripts/bench started it."""

    def __init__(self, cfg, stack, sim):
        self.name, self.cfg = "nginx", cfg
        self.path = Path("nginx", cfg.nginx_url, token=sim["admin_token"], ca=stack["ca_file"])
        self.path.process = cfg.nginx_pid

    def measure(self, concurrency):
        return measured(self.cfg, self.path, concurrency)


def measured(cfg, path, concurrency):
    result = with_cpu(path, cfg.sim_pid, lambda: h2load(path, TARGET, concurrency, cfg.seconds))
    log(
        f"  {path.name} c={concurrency}: {result['rps']:.0f} req/s, "
        f"CPU {result['cpu_ms']:.1f} ms/1000 (cluster {result['upstream_cpu_ms']:.1f})"
    )
    return result


def compare(a_runs, b_runs):
    """The pairs' verdict: medians of each side, the ratio of the medians,
    the median of the pairs' own ratios, and in how many pairs A was lower."""

    def median(runs, key):
        return statistics.median(r[key] for r in runs)

    cpu_ratios = [a["cpu_ms"] / b["cpu_ms"] for a, b in zip(a_runs, b_runs)]
    return {
        "pairs": len(a_runs),
        "cpu_ms": [median(a_runs, "cpu_ms"), median(b_runs, "cpu_ms")],
        "cpu_ms_range": [[min(r["cpu_ms"] for r in runs), max(r["cpu_ms"] for r in runs)] for runs in (a_runs, b_runs)],
        "cpu_ratio_of_medians": median(a_runs, "cpu_ms") / median(b_runs, "cpu_ms"),
        "cpu_median_ratio": statistics.median(cpu_ratios),
        "cpu_lower": sum(r < 1 for r in cpu_ratios),
        "rps": [median(a_runs, "rps"), median(b_runs, "rps")],
        "rps_ratio": median(a_runs, "rps") / median(b_runs, "rps"),
        "cluster_cpu_ms": [median(a_runs, "upstream_cpu_ms"), median(b_runs, "upstream_cpu_ms")],
        "runs": {"a": a_runs, "b": b_runs},
    }


def table(a, b, verdicts):
    lines = [
        f"| connections | {a} CPU per 1000 (median, range) | {b} | ratio of medians | median of the pairs' ratios "
        f"| {a} lower | req/s, {a} against {b} | cluster CPU per 1000 behind each |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for concurrency, v in verdicts.items():
        (ca, cb), ((la, ha), (lb, hb)) = v["cpu_ms"], v["cpu_ms_range"]
        lines.append(
            f"| {concurrency} | {ca:.1f} ms ({la:.1f} to {ha:.1f}) | {cb:.1f} ({lb:.1f} to {hb:.1f}) "
            f"| {v['cpu_ratio_of_medians']:.2f} | {v['cpu_median_ratio']:.2f} | {v['cpu_lower']} of {v['pairs']} "
            f"| {v['rps'][0]:,.0f} against {v['rps'][1]:,.0f} ({v['rps_ratio']:.2f}) "
            f"| {v['cluster_cpu_ms'][0]:.1f} against {v['cluster_cpu_ms'][1]:.1f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="scripts/bench's work folder (sim.json, stack.json, data.setup)")
    parser.add_argument("--portcullis", required=True, help="the portcullis build measured (A)")
    parser.add_argument("--against", help="another portcullis build (B) instead of nginx")
    parser.add_argument("--nginx-url")
    parser.add_argument("--nginx-pid", type=int)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--concurrencies", default="32,64")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--out", required=True)
    cfg = parser.parse_args()
    sim = json.load(open(os.path.join(cfg.work, "sim.json")))
    stack = json.load(open(os.path.join(cfg.work, "stack.json")))
    cfg.sim_pid = sim["pid"]
    cfg.store = os.path.join(cfg.work, "data.setup")
    cfg.config = stack["config"]
    a = Portcullis("portcullis", cfg.portcullis, cfg, stack)
    if cfg.against:
        b = Portcullis("against", cfg.against, cfg, stack)
    elif cfg.nginx_url and cfg.nginx_pid:
        b = Nginx(cfg, stack, sim)
    else:
        raise SystemExit("pairs: --against or --nginx-url and --nginx-pid")
    verdicts = {}
    for concurrency in (int(c) for c in cfg.concurrencies.split(",")):
        runs = {a.name: [], b.name: []}
        for i in range(cfg.pairs):
            for side in (a, b) if i % 2 == 0 else (b, a):
                runs[side.name].append(side.measure(concurrency))
        verdicts[concurrency] = compare(runs[a.name], runs[b.name])
    b_name = "the other build" if cfg.against else "nginx"
    summary = table("portcullis", b_name, verdicts)
    pairs = f"{cfg.pairs} pair{'s' if cfg.pairs != 1 else ''}"
    builds = f"portcullis is {cfg.portcullis}" + (f", the other build {cfg.against}" if cfg.against else "")
    print(
        f"\nThe small GET, {pairs} at each connection count, {cfg.seconds} s a run after 1 s of warm-up, "
        f"the order alternated; {builds}:\n\n{summary}"
    )
    os.makedirs(os.path.dirname(cfg.out) or ".", exist_ok=True)
    json.dump(
        {"a": cfg.portcullis, "b": cfg.against or "nginx", "seconds": cfg.seconds, "verdicts": verdicts, "table": summary},
        open(cfg.out, "w"),
        indent=2,
    )


if __name__ == "__main__":
    main()
