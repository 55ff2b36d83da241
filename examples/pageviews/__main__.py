"""The whole pipeline once: `python -m examples.pageviews`.

Without `--bootstrap` it starts a throwaway `strom serve` (port 0, data in a temporary
directory) and stops it at the end. Then: the services produce page views with event times over
ten minutes, the streaming job counts views per page per minute into the counts topic (one
run that processes what is there and stops), the counts are read back with a Kafka client, and
the batch job counts views per page over a fixed offset range.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from examples.pageviews.batch import count_views, offsets_json
from examples.pageviews.events import iso_ms, page_views
from examples.pageviews.produce import create_topics, produce
from examples.pageviews.readback import WindowCount, read_all, table, window_counts
from examples.pageviews.session import start_session
from examples.pageviews.stream import start_query

_STARTED = re.compile(r"Strom \S+ started: .*?listeners=[A-Z_]+://(?P<address>[^,\s]+)")


@contextmanager
def throwaway_broker(workdir: Path, timeout: float = 30.0) -> Iterator[str]:
    """`strom serve` (as `python -m strom serve`, the Strom this Python imports) on a free
    port with its data under `workdir`; yields its address."""
    log_path = workdir / "strom.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "strom", "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
             "--override", f"log.dirs={workdir / 'data'}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + timeout
        while (match := _STARTED.search(log_path.read_text())) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"strom serve did not start; its log:\n{log_path.read_text()}")
            time.sleep(0.05)  # polling the log for the startup line, against the deadline
        yield match.group("address")
    finally:
        process.terminate()  # SIGTERM: a clean shutdown
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(
    spark: SparkSession, bootstrap: str, workdir: Path, *, source: str, sink: str, count: int
) -> tuple[list[WindowCount], dict[str, int]]:
    """Produce, stream, read back, batch: the pipeline against the broker at `bootstrap`.
    Returns the window counts read back and the batch job's counts."""
    create_topics(bootstrap, {source: 3, sink: 1})
    events = page_views(count)
    delivered = produce(bootstrap, source, events)
    print(f"produced {len(delivered)} page views to {source!r}, event times "
          f"{iso_ms(events[0].ts_ms)} .. {iso_ms(events[-1].ts_ms)}")  # fmt: skip

    query = start_query(
        spark, bootstrap=bootstrap, source=source, sink=sink,
        checkpoint=str(workdir / "checkpoint"),
    )  # fmt: skip
    query.awaitTermination()
    counts = sorted(window_counts(read_all(bootstrap, sink)))
    print(f"\nstreaming job: views per page per minute, read back from {sink!r}")
    print(table(counts))
    print("(the last window stays open: the watermark has not passed it yet)")

    first = dict.fromkeys(range(3), 0)
    last = dict.fromkeys(range(3), 0)
    for d in delivered:
        last[d.partition] = max(last[d.partition], d.offset + 1)
    ending = {p: n // 2 for p, n in last.items()}
    views = count_views(
        spark, bootstrap=bootstrap, topic=source,
        starting=offsets_json(source, first), ending=offsets_json(source, ending),
    )  # fmt: skip
    print(f"\nbatch job: views per page in offsets {first} until {ending}")
    for page, n in sorted(views.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n:6d}  {page}")
    return counts, views


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the page-view pipeline once.")
    parser.add_argument("--bootstrap", help="a running broker (default: start a throwaway one)")
    parser.add_argument("--source-topic", default="pageviews")
    parser.add_argument("--sink-topic", default="pageview-counts")
    parser.add_argument("--count", type=int, default=600, help="page views, one a second")
    parser.add_argument("--workdir", type=Path, help="checkpoint (and broker data) directory")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pageviews-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        bootstrap = args.bootstrap
        if not bootstrap:
            bootstrap = stack.enter_context(throwaway_broker(workdir))
            print(f"started strom serve at {bootstrap} (data in {workdir / 'data'})")
        spark = start_session("pageviews")
        stack.callback(spark.stop)
        run(
            spark,
            bootstrap,
            workdir,
            source=args.source_topic,
            sink=args.sink_topic,
            count=args.count,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
