"""An example agent: takes a WorkItem it was offered, produces two Artifacts with sources (a
word count of its input and a summary derived from it), records Evidence for every
acceptance criterion, and submits, keeping its lease alive the whole time.

    python examples/summarise.py --url http://127.0.0.1:7070 --group g1 --agent agent-7 \\
        --work-item wi-1 --input corpus.txt [--key ~/.weft/agent.key]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys

import weft


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:7070")
    parser.add_argument("--group", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--work-item", required=True)
    parser.add_argument("--input", required=True, help="the text to summarise")
    parser.add_argument("--key", default=None, help="agent.key (default: the weft home's)")
    args = parser.parse_args(argv)

    with weft.connect(args.url, agent_id=args.agent, group_id=args.group, key=args.key) as agent:
        view = agent.work_item(args.work_item)
        if view["state"] == "offered":
            agent.accept_offer(args.work_item)
            view = agent.work_item(args.work_item)
        if view["state"] == "queued":
            agent.start(args.work_item)
        with agent.keep_lease(args.work_item) as keeper:
            source = agent.put(args.input, work_item=args.work_item, media_type="text/plain")
            text = agent.get_bytes(source["artifact"]).decode("utf-8", errors="replace")
            words = collections.Counter(re.findall(r"[a-z']+", text.lower()))
            counts = agent.put(
                json.dumps(dict(words.most_common(50))).encode(),
                work_item=args.work_item,
                media_type="application/json",
                sources=[source["artifact"]],
                name="counts.json",
            )
            keeper.check()
            total = sum(words.values())
            summary = {"words": total, "top": [w for w, _ in words.most_common(5)]}
            report = agent.put(
                json.dumps(summary).encode(),
                work_item=args.work_item,
                media_type="application/json",
                sources=[counts["artifact"], source["artifact"]],
                tools=[{"kind": "tool", "id": "summarise.py", "version": "1"}],
                name="summary.json",
            )
            evidence = [
                agent.record_evidence(
                    work_item=args.work_item,
                    criterion=criterion["id"],
                    outcome="pass",
                    summary=f"{total} words counted, top five named",
                    method="automated_test",
                    method_name="summarise.py self-check",
                    metrics={"words": total},
                    artifacts=[report["artifact"]],
                )["evidenceId"]
                for criterion in view["contract"]["acceptanceCriteria"]
            ]
            keeper.check()
            done = agent.submit(
                args.work_item, artifacts=[report["artifact"]], evidence=evidence
            )
    print(json.dumps({"state": done["state"]["state"], "report": report["artifact"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
