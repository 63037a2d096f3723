#!/usr/bin/env python3
"""Checks the checks' own tests: disables one clause of checkers/pipeline_checks.cc at a time,
rebuilds pipeline_checks_test and user_style_test, and reports which tests failed. A clause
whose removal no test notices is printed NOT CAUGHT (exit 1). The source file is restored
whatever happens. Run from the repository root after a release build in build/:

    python3 tools/clause_mutants.py              # every clause
    python3 tools/clause_mutants.py "state reads" # some, by name
"""
import subprocess, sys
p='checkers/pipeline_checks.cc'
orig=open(p).read()
muts=[
 ("source emitted twice", "    if (emitted != 1) {", "    if (emitted == 0) {"),
 ("source content", "    if (p.key != in.key || p.payload != in.payload || p.event_ts != in.event_ts || p.stream != in.stream) {", "    if (false) {"),
 ("exactly-once consumption", "      if (n == 1 || (n > 1 && !c.exactly_once)) continue;", "      if (n >= 1) continue;"),
 ("never consumed", "      if (n == 1 || (n > 1 && !c.exactly_once)) continue;", "      if (n != 1 && n <= 1 && n == 0) continue;"),
 ("consumed equals committed", "    if (p->key == m.key && p->stream == m.stream && p->payload == m.payload && p->event_ts == m.event_ts) return \"\";", "    if (p != nullptr) return \"\";"),
 ("outputs", "std::string outputs_problem(const EpochRecord& e) {\n", "std::string outputs_problem(const EpochRecord& e) {\n  return \"\";\n"),
 ("timers created", "std::string timers_created_problem(const EpochRecord& e) {\n", "std::string timers_created_problem(const EpochRecord& e) {\n  return \"\";\n"),
 ("reexecution problems", "    std::string problem = e.reexecution_problems.empty() ? outputs_problem(e) : e.reexecution_problems.front();", "    std::string problem = outputs_problem(e);"),
 ("state reads", "      if (got == want) continue;", "      continue;"),
 ("final tables", "    std::string problem = table_problem(table, table_or(h.tables, table, empty), want);\n    if (!problem.empty()) {\n      return failure(check, h, problem + \" (reference: the committed epochs re-executed)\");", "    std::string problem;\n    if (!problem.empty()) {\n      return failure(check, h, problem + \" (reference: the committed epochs re-executed)\");"),
 ("delivery missing", "  if (missing.empty()) return \"\";", "  return \"\";"),
 ("delivery duplicate", "    if (copies.size() > 1 && e.guarantee != Guarantee::kAtLeastOnce) {", "    if (false) {"),
 ("delivery unexpected id", "    if (want == expected.end()) {\n      return", "    if (want == expected.end()) {\n      continue;\n      return"),
 ("delivery other content", "      if (known) continue;", "      if (known || !known) continue;"),
 ("amo drop held", "      if (delivered.count(id) != 0) return fmt::format(\"message {} counted as dropped, but the target holds it\", hex_id(id));", "      (void)id;"),
 ("timer watermark", "      if (f.trigger_ts <= f.watermark) continue;", "      continue;"),
]
results=[]
try:
    only=set(sys.argv[1:])
    for name, old, new in muts:
        if only and name not in only: continue
        assert orig.count(old)>=1, name
        open(p,'w').write(orig.replace(old,new,1))
        b=subprocess.run(["cmake","--build","build","--target","pipeline_checks_test","user_style_test","-j2"],capture_output=True,text=True)
        if b.returncode!=0:
            results.append((name,"BUILD FAILED")); print(name, "BUILD FAILED", b.stdout[-400:], flush=True); continue
        r1=subprocess.run(["build/tests/pipeline_checks_test"],capture_output=True,text=True)
        r2=subprocess.run(["build/tests/user_style_test"],capture_output=True,text=True)
        failed=[l.split()[3] for l in (r1.stdout+r2.stdout).splitlines() if l.startswith("[  FAILED  ]") and "(" in l]
        crashed = (r1.returncode not in (0,1)) or (r2.returncode not in (0,1))
        results.append((name, ("caught by "+", ".join(sorted(set(failed)))) if failed else ("caught: the tests crashed" if crashed else ("NOT CAUGHT" if r1.returncode==0 and r2.returncode==0 else "caught (exit %d/%d)"%(r1.returncode,r2.returncode)))))
        print(name, results[-1][1], flush=True)
finally:
    open(p,'w').write(orig)
    subprocess.run(["cmake", "--build", "build", "--target", "pipeline_checks_test", "user_style_test", "-j2"],
                   capture_output=True)
sys.exit(1 if any(r[1].startswith(("NOT CAUGHT", "BUILD FAILED")) for r in results) else 0)
