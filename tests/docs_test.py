#!/usr/bin/env python3
"""The docs show what the binary prints, and this test keeps them true.

Usage: docs_test.py ONCEFLOW SOURCE_DIR

- Every ```console block of README.md and docs/debugging.md: each "$ onceflow ARGS" line is
  run (in a scratch directory whose scenarios/ and docs/ are the source tree's, so relative
  paths work and files it writes land there), must exit 0 or 1, and each line shown under it
  must be found in what it printed on stdout, in the order shown. Runs of spaces count as one;
  "..." stands for any text.
- The counts README.md quotes (bug switches, recovery-path probes) are the binary's.
- docs/guarantees.md's table of bug switches says, for each, what `onceflow list --bugs` says
  the mistake is, and the check that caught it and the scenario, seed and seeds tried that
  `onceflow mutants -j 2 --json` reports.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

onceflow, src = sys.argv[1], sys.argv[2]
failures = []


def fail(text):
    failures.append(text)
    print("FAIL: " + text, flush=True)


def squeeze(text):
    return re.sub(r"\s+", " ", text).strip()


def holds(shown, printed):
    """Whether the printed line holds the shown one's pieces ("..." between them), in order."""
    at = 0
    for piece in (p.strip() for p in squeeze(shown).split("...")):
        if not piece:
            continue
        at = printed.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def console_blocks(path):
    """(command, [lines shown under it]) for every "$ onceflow" line of ```console blocks."""
    out = []
    inside = False
    for line in open(os.path.join(src, path)).read().split("\n"):
        if line.startswith("```"):
            inside = line.strip() == "```console"
            continue
        if not inside:
            continue
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def run(command, scratch):
    args = shlex.split(command)
    assert args[0] == "onceflow", command
    done = subprocess.run([onceflow] + args[1:], cwd=scratch, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout, done.stderr


with tempfile.TemporaryDirectory() as scratch:
    for tree in ("scenarios", "docs"):
        os.symlink(os.path.join(src, tree), os.path.join(scratch, tree))

    # 1. The commands the docs show, and what they print.
    ran = 0
    for doc in ("README.md", "docs/debugging.md"):
        blocks = console_blocks(doc)
        if not blocks:
            fail(f"{doc} has no ```console block with a '$ onceflow' line")
        for command, shown in blocks:
            ran += 1
            rc, stdout, stderr = run(command, scratch)
            if rc not in (0, 1):
                fail(f"{doc}: '{command}' exited {rc}: {stderr.strip()[:300]}")
                continue
            printed = [squeeze(l) for l in stdout.split("\n")]
            at = 0
            for want in shown:
                if not want.strip():
                    continue
                found = next((i for i in range(at, len(printed)) if holds(want, printed[i])), None)
                if found is None:
                    near = [l for l in printed if holds(want.split("...")[0][:40], l)][:2]
                    fail(f"{doc}: '{command}' did not print, in this order: {squeeze(want)[:240]}"
                         + (f"\n  it printed: {near[0][:240]}" if near else ""))
                    break
                at = found + 1
    print(f"ran {ran} commands of README.md and docs/debugging.md")

    # 2. The counts README.md quotes.
    readme = open(os.path.join(src, "README.md")).read()
    bugs = json.loads(subprocess.run([onceflow, "list", "--bugs", "--json"], cwd=scratch, capture_output=True,
                                     text=True, check=True).stdout)["engine"]
    probes = json.loads(subprocess.run([onceflow, "list", "--probes", "--json"], cwd=scratch, capture_output=True,
                                       text=True, check=True).stdout)["probes"]
    for pattern, actual, what in ((r"the (\d+) bug switches", len(bugs), "bug switches"),
                                  (r"the (\d+) recovery-path probes", len(probes), "probes")):
        quoted = re.findall(pattern, readme)
        if not quoted:
            fail(f"README.md no longer says how many {what} there are ({pattern})")
        for n in quoted:
            if int(n) != actual:
                fail(f"README.md says {n} {what}; the binary has {actual}")

    # 3. docs/guarantees.md's table of bug switches against mutants.
    done = subprocess.run([onceflow, "mutants", "-j", "2", "--json"], cwd=scratch, capture_output=True, text=True,
                          timeout=1200)
    mutants = {m["bug"]: m for m in json.loads(done.stdout)["mutants"]}
    guarantees = open(os.path.join(src, "docs/guarantees.md")).read()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| .* \| (.* \| .*) \|$", guarantees, re.M))
    for bug, m in mutants.items():
        if bug not in rows:
            fail(f"docs/guarantees.md's table lacks the bug switch {bug}")
            continue
        caught, where = [c.strip() for c in rows[bug].rsplit(" | ", 1)]
        scenario = os.path.splitext(os.path.basename(m["scenario"]))[0]
        if caught.split(" ")[0] != m["checker"]:
            fail(f"docs/guarantees.md: {bug} caught by '{caught}'; mutants says {m['checker']}")
        if not where.startswith(f"{scenario}, {m['seed']} ({m['seeds_tried']})"):
            fail(f"docs/guarantees.md: {bug} at '{where}'; mutants says {scenario}, {m['seed']} ({m['seeds_tried']})")
    # The table's "the mistake" column is what `list --bugs` says of each switch.
    mistakes = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (.*?) \| .* \| .* \|$", guarantees, re.M))
    for b in bugs:
        if mistakes.get(b["name"]) != b["mistake"]:
            fail(f"docs/guarantees.md says {b['name']} is '{mistakes.get(b['name'])}'; list --bugs says '{b['mistake']}'")
    for n, total in re.findall(r"(\d+) of (\d+) caught", guarantees):
        if int(n) != len(mutants) or int(total) != len(mutants):
            fail(f"docs/guarantees.md says {n} of {total} caught; mutants ran {len(mutants)}")

if failures:
    print(f"docs_test: {len(failures)} problems")
    sys.exit(1)
print("docs_test: the docs show what the binary prints")
