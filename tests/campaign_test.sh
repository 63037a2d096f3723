#!/usr/bin/env bash
# An outside-style campaign, as a test: a fixed budget of generated cases, each a random
# mutation of a library scenario, of a pipeline spec, or of a command line, run by the real
# binary. Any exit other than 0 (passed), 1 (a check failed) or 2 (bad input, one line on
# stderr) fails the test, and so does a case that outruns its timeout: a crash, an abort, a
# hang. The cases come from a seeded generator: the same SEED gives the same cases, and a
# failure prints the command and keeps the files it ran on.
# Usage: campaign_test.sh ONCEFLOW SOURCE_DIR [CASES] [SEED]
set -uo pipefail
onceflow=$(realpath "$1")
src=$(realpath "$2")
cases=${3:-300}
seed=${4:-1}
work=$(mktemp -d)
# Against a sanitizer build, a report must not pass for a failed check (exit 1).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86" UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=86"
keep=
cleanup() { [[ -z $keep ]] && rm -rf "$work"; }
trap cleanup EXIT

# The generator writes one case per line: a directory to prepare (the library copied, one
# file mutated) and the command to run in it, as JSON.
python3 - "$src" "$work" "$cases" "$seed" >"$work/cases.jsonl" <<'PY'
import json, os, random, re, shutil, sys
src, work, cases, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
scen_dir = os.path.join(src, "scenarios")
scenarios = sorted(f for f in os.listdir(scen_dir) if f.endswith(".yaml"))
pipelines = sorted(os.path.join("pipelines", f) for f in os.listdir(os.path.join(scen_dir, "pipelines")) if f.endswith(".yaml"))
reals = sorted(os.path.join("real", f) for f in os.listdir(os.path.join(scen_dir, "real")) if f.endswith(".yaml"))
# Values that stay small (a mutation must not make a valid run take minutes), YAML syntax
# that readers have tripped on, and plain garbage.
tokens = ["0", "-1", "1", "3", "65", "4097", "2000", "0.5", "1e3", "''", '""', "~", "null", "true", "[]", "{}",
          "[1, 2]", "{a: 1}", "&a [*a]", "*nowhere", "!!binary aGk=", "<<: {x: 1}", "'\\x00'", "1ms", "0s",
          "-5s", "99999999999999999999", "é", "\t", "{", "[", "]", "'", "key: value: other", "---", "...",
          "stopped now", "exactly_once", "at_most_once", "queue", "service_log", "kafka", "x" * 300]
def mutate(text):
    lines = text.split("\n")
    kind = rng.choice(["number", "number", "number", "value", "value", "value", "delete", "duplicate", "swap",
                       "truncate", "indent", "alias"])
    i = rng.randrange(len(lines))
    numbered = [k for k, l in enumerate(lines) if re.search(r"\d+", l) and not l.lstrip().startswith("#")]
    if kind == "number" and numbered:
        # A number moved within a small range: mostly still a valid file, another run.
        k = rng.choice(numbered)
        lines[k] = re.sub(r"\d+", lambda m: str(max(0, int(m.group()) + rng.choice([-2, -1, 1, 2, 7]))), lines[k], count=1)
    elif kind == "value":
        line = lines[i]
        if ":" in line:
            head = line[: line.index(":") + 1]
            lines[i] = head + " " + rng.choice(tokens)
        else:
            lines[i] = line + " " + rng.choice(tokens)
    elif kind == "delete":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == "truncate":
        return text[: rng.randrange(len(text) + 1)]
    elif kind == "indent":
        lines[i] = rng.choice(["  ", "    ", "\t", ""]) + lines[i].lstrip()
    elif kind == "alias":
        lines.insert(i, "z: &z [*z, *z]" if rng.random() < 0.5 else "zz: &zz {a: *zz}")
    return "\n".join(lines)
flags = ["--seed", "--seeds", "--first-seed", "--jobs", "--json", "--swarm", "--no-swarm", "--trace", "--junit",
         "--require-effects", "--require-probes", "--inert-fault", "--bug", "--messages", "--rate", "--keys",
         "--verify", "--no-history", "--progress-every", "--stats", "--workers", "--bogus", "-x", "--"]
values = ["", "0", "-1", "1", "2", "18446744073709551616", "abc", "crash", "nowhere", "1ms", "/dev/null",
          "/nonexistent/x", "5"]
for n in range(cases):
    case = {"n": n}
    what = rng.choice(["scenario", "scenario", "scenario", "pipeline", "real", "cli"])
    case["what"] = what
    if what == "scenario":
        name = rng.choice(scenarios)
        case["mutate"] = name
        case["argv"] = rng.choice([["run", "scenarios/" + name, "--seed", str(rng.randrange(1, 50))],
                                   ["explore", "scenarios/" + name, "--seeds", "2", "--jobs", "1"],
                                   ["list", "--scenarios", "scenarios"]])
    elif what == "pipeline":
        name = rng.choice(pipelines)
        case["mutate"] = name
        users = [s for s in scenarios if ("pipeline: " + name) in open(os.path.join(scen_dir, s)).read()]
        scenario = rng.choice(users) if users else rng.choice(scenarios)
        case["argv"] = ["run", "scenarios/" + scenario, "--seed", str(rng.randrange(1, 50))]
    elif what == "real":
        name = rng.choice(reals + ["pipelines/keyed_aggregation.yaml", "pipelines/retryable_request.yaml"])
        case["mutate"] = name
        case["argv"] = ["real", "scenarios/" + name, "--data", "data", "--messages", str(rng.choice([0, 1, 50, 300])),
                        "--no-progress"] + (["--verify"] if rng.random() < 0.5 else [])
        if "kafka" in name:  # Kafka sources never end: only --verify ends such a run by itself
            case["argv"] += ["--kafka", "mock"] + ([] if "--verify" in case["argv"] else ["--verify"])
    else:
        base = rng.choice([["run", "scenarios/keyed_aggregation.yaml"], ["explore", "scenarios/keyed_aggregation.yaml"],
                           ["real", "scenarios/real/keyed_aggregation.yaml", "--data", "data"], ["list"],
                           ["replay", "scenarios/keyed_aggregation.yaml"], ["mutants", "--help"],
                           [rng.choice(["bogus", "", "-h", "--version"])]])
        argv = list(base)
        for _ in range(rng.randrange(0, 4)):
            flag = rng.choice(flags)
            argv.append(flag)
            if rng.random() < 0.7:
                argv.append(rng.choice(values))
        if argv[0] == "real" and "--messages" not in argv:
            argv += ["--messages", "100"]
        if argv[0] == "explore" and "--seeds" not in argv:
            argv += ["--seeds", "2"]
        case["argv"] = argv
    if "mutate" in case:
        text = open(os.path.join(scen_dir, case["mutate"]), encoding="utf-8", errors="replace").read()
        for _ in range(rng.choice([1, 1, 2, 3])):
            text = mutate(text)
        case["text"] = text
    print(json.dumps(case))
PY

failures=0
declare -A outcomes=()
while IFS= read -r line; do
  n=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])[\"n\"])" "$line")
  dir="$work/case-$n"
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$src/scenarios" "$dir/scenarios"
  mapfile -d '' -t argv < <(python3 - "$line" "$dir" <<'PY'
import json, os, sys
case, d = json.loads(sys.argv[1]), sys.argv[2]
if "mutate" in case:
    open(os.path.join(d, "scenarios", case["mutate"]), "w", encoding="utf-8").write(case["text"])
for a in case["argv"]:
    sys.stdout.write(a + "\0")
PY
)
  rc=0
  (cd "$dir" && timeout 60 "$onceflow" "${argv[@]}" >"$dir/out" 2>"$dir/err") || rc=$?
  outcomes[$rc]=$(( ${outcomes[$rc]:-0} + 1 ))
  bad=
  case $rc in
    0 | 1) ;;
    2) [[ $(wc -l <"$dir/err") -eq 1 ]] || bad="exit 2 with $(wc -l <"$dir/err") lines on stderr, not one" ;;
    124) bad="no answer in 60 s" ;;
    *) bad="exit $rc" ;;
  esac
  # A check that failed on a mutated scenario may be the mutation's doing (a guarantee
  # changed) or the engine's: listed for a look, not failed.
  [[ $rc -eq 1 ]] && echo "exit 1: case $n: ${argv[*]}: $(grep -m1 FAIL "$dir/out" | cut -c1-200)"
  if [[ -n $bad ]]; then
    failures=$((failures + 1))
    keep=1
    echo "FAIL: case $n: $bad: (cd $dir && $onceflow ${argv[*]}): $(tail -c 300 "$dir/err")"
  else
    rm -rf "$dir"
  fi
done <"$work/cases.jsonl"
summary=""
for rc in $(printf '%s\n' "${!outcomes[@]}" | sort -n); do summary+=" exit $rc: ${outcomes[$rc]};"; done
echo "campaign: $cases cases (seed $seed):$summary $failures failed"
[[ $keep ]] && echo "the failing cases' directories are kept under $work"
[[ $failures -eq 0 ]]
