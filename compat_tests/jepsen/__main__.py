"""Long mode: `python -m compat_tests.jepsen --faults 100 --seed N --mix hard` (see
docs/replication.md); the transactional workload with `--workload txn` (docs/transactions.md).

Starts its own 3-node cluster in a temporary directory (eligible leader replicas on unless
`--elr 0`), prints the seed and fault schedule first (so a run can be repeated), the faults as
injected, then the checker's summary; exits 1 on any violation. `--faults 0 --duration S`: a
run with no faults.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import tempfile
from pathlib import Path

from compat_tests.jepsen.checker import check, summary
from compat_tests.jepsen.scenarios import SCENARIOS
from compat_tests.jepsen.txn_checker import check as check_txn
from compat_tests.jepsen.txn_checker import summary as txn_summary
from compat_tests.jepsen.txn_workload import TxnOptions
from compat_tests.jepsen.txn_workload import cluster_settings as txn_cluster_settings
from compat_tests.jepsen.txn_workload import describe_plan as describe_txn_plan
from compat_tests.jepsen.txn_workload import plan_of as txn_plan_of
from compat_tests.jepsen.txn_workload import run as run_txn
from compat_tests.jepsen.workload import (
    ELR,
    Options,
    cluster_settings,
    describe_plan,
    plan_of,
    run,
)
from strom.broker.testing.cluster import ClusterProcess
from strom.config.planted import BUGS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.jepsen", description=__doc__)
    parser.add_argument("--seed", type=int, default=None, help="default: a random seed")
    parser.add_argument("--faults", type=int, default=Options.faults)
    parser.add_argument("--workload", choices=("queue", "txn"), default="queue",
                        help="txn: transactions (txn_workload.py), its mix defaults to txn")  # fmt: skip
    parser.add_argument("--mix", choices=("classic", "hard", "txn"), default=None,
                        help="default: hard (queue), txn (txn)")  # fmt: skip
    parser.add_argument("--strict", action="store_true",
                        help="txn: judge every write cycle, also those concurrent writers explain")  # fmt: skip
    parser.add_argument("--elr", type=int, choices=(0, 1), default=1,
                        help="eligible.leader.replicas.version the cluster is formatted with")  # fmt: skip
    parser.add_argument("--whole-cluster-power-cuts", action="store_true",
                        help="also cut every node's power at once (loses what nobody flushed)")  # fmt: skip
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds of load with --faults 0")  # fmt: skip
    parser.add_argument("--topic-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a config of the queue topic (e.g. flush.messages=1)")  # fmt: skip
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default=None,
                        help="a scripted nemesis instead of the seed's schedule (scenarios.py)")  # fmt: skip
    parser.add_argument("--plant", action="append", default=[], choices=sorted(BUGS),
                        help="put a fixed bug back in every node (strom.config.planted)")  # fmt: skip
    parser.add_argument("--partitions", type=int, default=Options.partitions)
    parser.add_argument("--producers", type=int, default=Options.producers)
    parser.add_argument("--rate", type=float, default=Options.rate, help="values/s per producer")
    parser.add_argument("--history", type=Path, default=None,
                        help="write the history (every send and read) here as JSON lines")  # fmt: skip
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the nodes' data and logs in this directory")  # fmt: skip
    parser.add_argument("--consumer-debug", default="", metavar="CONTEXTS",
                        help="librdkafka debug contexts for the live consumer, e.g. "
                        "fetch,topic,metadata,broker; logged to live-consumer.log in --keep")  # fmt: skip
    parser.add_argument("--producer-debug", nargs="?", const="eos,msg,protocol", default="",
                        metavar="CONTEXTS",
                        help="librdkafka debug contexts of every producer (default eos,msg,"
                        "protocol; eos logs each producer-epoch bump and why), to producer-N.log "
                        "in --keep (txn: eos,msg,protocol to txn-worker-N.log)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.producer_debug and not args.keep:
        parser.error("--producer-debug needs --keep (where its logs go)")
    if args.workload == "txn":
        return txn_main(args)
    args.mix = args.mix or "hard"
    if args.consumer_debug and not args.keep:
        parser.error("--consumer-debug needs --keep (where its log goes)")
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    scenario = SCENARIOS[args.scenario] if args.scenario else None
    topic_config = dict(scenario.topic_config) if scenario else {}
    topic_config.update(kv.split("=", 1) for kv in args.topic_config)
    opts = Options(seed=seed, faults=0 if scenario else args.faults, mix=args.mix,
                   message_timeout_ms=scenario.message_timeout_ms if scenario else Options.message_timeout_ms,
                   partitions=args.partitions, producers=args.producers, rate=args.rate,
                   duration=args.duration,
                   whole_cluster_power_cuts=args.whole_cluster_power_cuts,
                   topic_config=topic_config, consumer_debug=args.consumer_debug,
                   consumer_log=args.keep / "live-consumer.log" if args.keep else None,
                   producer_debug=args.producer_debug, producer_log_dir=args.keep)  # fmt: skip
    if scenario:
        print(f"scenario {scenario.name} ({ELR}={args.elr}, planted: {args.plant or 'nothing'})")
    else:
        print(describe_plan(opts, plan_of(opts)) + f"\n  ({ELR}={args.elr})")
    settings = cluster_settings(args.elr, split=bool(scenario and scenario.split),
                                planted=tuple(args.plant),
                                overrides=scenario.overrides if scenario else None)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="strom-jepsen-") as tmp:
        root = args.keep or Path(tmp)
        with ClusterProcess(root, **settings) as cluster:
            try:
                result = run(cluster, opts, nemesis=scenario.nemesis if scenario else None)
            finally:
                if args.keep:
                    for node in cluster.nodes:
                        (root / f"node-{node.node_id}.log").write_text(node.tail(5000))
    if args.history:
        with args.history.open("w") as out:
            for send in result.history.sends:
                out.write(json.dumps({"type": "send", **dataclasses.asdict(send)}) + "\n")
            for read in result.history.reads:
                out.write(json.dumps({"type": "read", **dataclasses.asdict(read)}) + "\n")
    report = check(result.history)
    what = f"scenario {scenario.name}" if scenario else f"seed {opts.seed}, {len(result.plan)} faults"
    print(f"--- {what}, {result.seconds:.0f}s ---")
    print(summary(report))
    return 0 if report.ok else 1


def txn_main(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    opts = TxnOptions(seed=seed, faults=args.faults, mix=args.mix or "txn",
                      duration=args.duration, strict=args.strict,
                      debug_dir=args.keep if args.producer_debug else None,
                      partitions=args.partitions if args.partitions != Options.partitions
                      else TxnOptions.partitions)  # fmt: skip
    print(describe_txn_plan(opts, txn_plan_of(opts)) + f"\n  ({ELR}={args.elr})")
    with tempfile.TemporaryDirectory(prefix="strom-jepsen-txn-") as tmp:
        root = args.keep or Path(tmp)
        with ClusterProcess(root, **txn_cluster_settings(args.elr)) as cluster:
            try:
                result = run_txn(cluster, opts)
            finally:
                if args.keep:
                    for node in cluster.nodes:
                        (root / f"node-{node.node_id}.log").write_text(node.tail(5000))
    if args.history:
        with args.history.open("w") as out:
            for txn in result.history.txns:
                out.write(json.dumps({"type": "txn", **dataclasses.asdict(txn)}) + "\n")
            for read in result.history.reads:
                out.write(json.dumps({"type": "read", **dataclasses.asdict(read)}) + "\n")
    report = check_txn(result.history, strict=opts.strict)
    print(f"--- seed {opts.seed}, {len(result.plan)} faults, {result.seconds:.0f}s ---")
    print(txn_summary(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
