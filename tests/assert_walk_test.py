#!/usr/bin/env python3
"""Every assert() a user's input could reach is guarded where the input is read.

Walks every assert() in the engine, the simulator, the faults, the real backends, the
command line and the fibers, and holds them to tests/asserts.txt: each is listed either as
an invariant of the code ("engine") or as "guarded", with the reproducer below that feeds
the binary the value that would reach it; the walk runs each reproducer and requires exit 2
with one line on stderr naming the problem (never an abort). An assert added without a line
in the list, or a line whose assert is gone, fails the test.

Usage: assert_walk_test.py ONCEFLOW SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

onceflow, src = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])

# name -> (command with {dir}, [(file under scenarios/, old text, new text)], what stderr says)
RUN = ["run", "{dir}/scenarios/keyed_aggregation.yaml", "--seed", "1"]
BANK = ["run", "{dir}/scenarios/kernel_bank.yaml", "--seed", "1"]
WIDE = ["run", "{dir}/scenarios/wide.yaml", "--seed", "1"]
REPRODUCERS = {
    "contract-request": (
        ["run", "{dir}/scenarios/retryable_request.yaml", "--seed", "1"],
        [("pipelines/retryable_request.yaml", "input_streams: [event, response]", "input_streams: [response]"),
         ("pipelines/retryable_request.yaml", "input_streams: [request]", "input_streams: [event]"),
         ("pipelines/retryable_request.yaml", "  answers: {type: async_queue, input_stream: results}",
          "  answers: {type: async_queue, input_stream: results}\n  asked: {type: async_queue, input_stream: request}")],
        "RequestProcessor reads only request, not 'event'"),
    "contract-state": (
        ["real", "{dir}/scenarios/pipelines/retryable_request.yaml", "--data", "{dir}/data", "--messages", "10"],
        [("pipelines/retryable_request.yaml", "output_stream: event}", "output_stream: evt}"),
         ("pipelines/retryable_request.yaml", "input_streams: [event, response]", "input_streams: [evt, response]")],
        "StateKeeper reads only event and response, not 'evt'"),
    "unregistered": (RUN, [("pipelines/keyed_aggregation.yaml", "processing_function: Counter",
                            "processing_function: Nobody")], "is not registered in this program"),
    "workers": (RUN, [("keyed_aggregation.yaml", "topology: {workers: 3}", "topology: {workers: 0}")],
                "topology.workers"),
    "controllers": (RUN, [("keyed_aggregation.yaml", "topology: {workers: 3}", "topology: {workers: 3, controllers: 0}")],
                    "topology.controllers"),
    "epoch-batch-limit": (RUN, [("pipelines/keyed_aggregation.yaml", "name: keyed-aggregation\n",
                                 "name: keyed-aggregation\nepoch_batch_limit: 0\n")], "epoch_batch_limit"),
    "lease-ttl": (RUN, [("pipelines/keyed_aggregation.yaml", "name: keyed-aggregation\n",
                         "name: keyed-aggregation\nlease_ttl: 0s\n")], "lease_ttl"),
    "undeclared-timer": (
        ["run", "{dir}/scenarios/retryable_request.yaml", "--seed", "1"],
        [("pipelines/retryable_request.yaml", "    timer_streams:\n      retry: {watermark: system_time}\n", "")],
        "sets a timer, but its spec declares no timer_streams"),
    "accounts": (BANK,
                 [("kernel_bank.yaml", "  accounts: 8", "  accounts: 1")], "workload.accounts"),
    "ping-interval": (BANK,
                      [("kernel_bank.yaml", "  ping_interval: 400ms", "  ping_interval: 3s")],
                      "must be shorter than workload.lease_ttl"),
    "rpc-timeout": (BANK,
                    [("kernel_bank.yaml", "  rpc_timeout: 50ms", "  rpc_timeout: 0ms")], "workload.rpc_timeout: must be positive"),
    "plan-duration": (WIDE,
                      [("wide.yaml", "at: 1s, for: 500ms}", "at: 1s, for: -500ms}")], "faults.plan"),
    "plan-node": (WIDE,
                  [("wide.yaml", "node: worker-3,", "node: worker-99,")], "worker-99"),
    "plan-peer": (WIDE,
                  [("wide.yaml", "    - {kind: crash, node: worker-3, at: 1500ms, for: 1s}",
                    "    - {kind: partition, node: worker-3, peer: nowhere, at: 1500ms, for: 1s}")], "nowhere"),
    "knobs": (["run", "{dir}/scenarios/pipeline_stop_long.yaml", "--seed", "1"],
              [("pipeline_stop_long.yaml", "knobs: {epoch_batch_limit: 64}", "knobs: {epoch_batch_limit: 0}")],
              "epoch_batch_limit"),
    "spec": (RUN, [("pipelines/keyed_aggregation.yaml", "input_stream: counts", "input_stream: nothing")],
             "nothing"),
    "respec-spec": (["run", "{dir}/scenarios/source_swap.yaml", "--seed", "1"],
                    [("pipelines/keyed_aggregation_swapped.yaml", "sources:", "sources: [")], "keyed_aggregation_swapped"),
    "respec-partitions": (["run", "{dir}/scenarios/source_swap.yaml", "--seed", "1"],
                          [("pipelines/keyed_aggregation_swapped.yaml", "table: events_v2, partitions: 2",
                            "partitions: 5")], "a respec may change only the tables its queue sources read"),
    "heal-at": (["run", "{dir}/scenarios/pipeline_stop.yaml", "--seed", "1"],
                [("pipeline_stop.yaml", "heal_at: 8s", "heal_at: 50ms")], "must come after faults.start"),
}

failures = []


def extract():
    found = []
    for d in ["core", "sim", "faults", "simulated", "real", "cli", "checkers", "fibers"]:
        for dp, _, files in os.walk(os.path.join(src, d)):
            for f in sorted(files):
                if not f.endswith((".cc", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dp, f), src)
                text = open(os.path.join(src, path)).read()
                for m in re.finditer(r"(?<![\w])assert\(", text):
                    i, depth = m.end(), 1
                    while depth and i < len(text):
                        depth += {"(": 1, ")": -1}.get(text[i], 0)
                        i += 1
                    found.append((path, " ".join(text[m.end(): i - 1].split())))
    return found


listed = {}
for n, line in enumerate(open(os.path.join(src, "tests", "asserts.txt")), 1):
    line = line.rstrip("\n")
    if not line or line.startswith("#"):
        continue
    fields = [f.strip() for f in line.split(" | ")]
    if len(fields) < 3 or fields[2] not in ("engine", "guarded") or (fields[2] == "guarded" and len(fields) != 5):
        failures.append(f"tests/asserts.txt:{n}: expected FILE | CONDITION | engine, or ... | guarded | WHERE | REPRODUCER")
        continue
    listed.setdefault((fields[0], fields[1]), []).append(fields[2:])

found = extract()
for key in found:
    if key not in listed:
        failures.append(f"{key[0]}: assert({key[1]}) is not in tests/asserts.txt: say whether a user's input reaches it")
for key in listed:
    if key not in found:
        failures.append(f"tests/asserts.txt lists assert({key[1]}) in {key[0]}, which has no such assert any more")

guarded = {tuple(v[2:]) for vs in listed.values() for v in vs if v[0] == "guarded"}
names = {v[2] for vs in listed.values() for v in vs if v[0] == "guarded"}
for name in sorted(names):
    if name not in REPRODUCERS:
        failures.append(f"tests/asserts.txt names reproducer '{name}', which tests/assert_walk_test.py does not define")
        continue
    command, edits, says = REPRODUCERS[name]
    with tempfile.TemporaryDirectory() as d:
        shutil.copytree(os.path.join(src, "scenarios"), os.path.join(d, "scenarios"))
        for file, old, new in edits:
            path = os.path.join(d, "scenarios", file)
            text = open(path).read()
            if old not in text:
                failures.append(f"reproducer {name}: '{old}' is not in scenarios/{file} any more")
                break
            open(path, "w").write(text.replace(old, new, 1))
        else:
            argv = [onceflow] + [a.replace("{dir}", d) for a in command]
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                failures.append(f"reproducer {name}: no answer in 120 s")
                continue
            err = r.stderr.strip().split("\n")
            if r.returncode != 2 or len(err) != 1 or says not in err[0]:
                failures.append(f"reproducer {name}: exit {r.returncode}, stderr {r.stderr.strip()[:300]!r}; "
                                f"expected exit 2 and one line with {says!r}")
            else:
                print(f"ok: {name}: {err[0][:160]}")

engine = sum(1 for vs in listed.values() for v in vs if v[0] == "engine")
print(f"assert walk: {len(found)} asserts, {engine} engine invariants, {len(found) - engine} guarded by "
      f"{len(names)} reproducers; {len(failures)} problems")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
