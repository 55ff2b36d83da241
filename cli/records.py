"""`strom produce` and `strom consume`, with format strings.

Format strings (as kcat's and rpk's): `%t` topic, `%p` partition, `%o` offset, `%k` key,
`%v` value, `%h` headers (`k=v,k=v`), `%T` timestamp (ms), `%%` a percent sign; `\\n`, `\\t`
and `\\\\` are escapes. `consume` prints each record through its format (default `%v\\n`);
`produce` reads stdin one line per record and parses each line with its format (default
`%v\\n`: the line is the value), so `-f '%k %v\\n'` splits a key off at the first space.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import click
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from strom.cli.context import Context, pass_context
from strom.cli.session import EXIT_FAILED, CliError, describe_error
from strom.cli.topics import key_values

_TOKEN = re.compile(r"%(.)|\\(.)")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r"}
OUTPUT_FIELDS = set("tpokvhT")
INPUT_FIELDS = set("kvph")


def parse_format(text: str, allowed: set[str]) -> list[str | tuple[str]]:
    """Literal text and (field,) tokens; a usage error for an unknown % or \\ code."""
    parts: list[str | tuple[str]] = []
    position = 0
    for match in _TOKEN.finditer(text):
        parts.append(text[position : match.start()])
        field, escape = match.group(1), match.group(2)
        if field is not None:
            if field == "%":
                parts.append("%")
            elif field in allowed:
                parts.append((field,))
            else:
                raise click.BadParameter(
                    f"unknown %{field} in {text!r} (known: "
                    + " ".join(f"%{f}" for f in sorted(allowed)) + ")",
                    param_hint="--format-string",
                )  # fmt: skip
        else:
            if escape not in _ESCAPES:
                raise click.BadParameter(
                    f"unknown escape \\{escape} in {text!r}", param_hint="--format-string"
                )
            parts.append(_ESCAPES[escape])
        position = match.end()
    parts.append(text[position:])
    return [p for p in parts if p != ""]


def render(parts: list[str | tuple[str]], record: dict[str, Any]) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value = record[{"t": "topic", "p": "partition", "o": "offset", "k": "key", "v": "value",
                        "h": "headers", "T": "timestamp"}[part[0]]]  # fmt: skip
        if part[0] == "h":
            value = ",".join(f"{k}={v}" for k, v in value)
        out.append("" if value is None else str(value))
    return "".join(out)


def input_pattern(parts: list[str | tuple[str]]) -> re.Pattern[str]:
    """A regex reading one line through an input format (its trailing newline dropped)."""
    if parts and isinstance(parts[-1], str) and parts[-1].endswith("\n"):
        parts = [*parts[:-1], parts[-1][:-1]] if parts[-1] != "\n" else parts[:-1]
    fields = [p for p in parts if not isinstance(p, str)]
    regex = ""
    for index, part in enumerate(parts):
        if isinstance(part, str):
            regex += re.escape(part)
        else:
            if fields.count(part) > 1:
                raise click.BadParameter(f"%{part[0]} appears twice", param_hint="--format-string")
            last = index == len(parts) - 1
            regex += f"(?P<{part[0]}>{'.*' if last else '.*?'})"
    return re.compile(regex, re.S)


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "backslashreplace")


@click.command()
@click.argument("topic")
@click.option(
    "-f",
    "--format-string",
    "fmt",
    default="%v\\n",
    show_default=True,
    help="How to read each input line.",
)
@click.option("-k", "--key", help="The key of every record (unless the format reads %k).")
@click.option(
    "-H",
    "--header",
    "headers",
    multiple=True,
    metavar="KEY=VALUE",
    help="A header on every record (repeatable).",
)
@click.option(
    "-p",
    "--partition",
    type=click.IntRange(min=0),
    help="Produce to this partition (default: by key, as Kafka's clients).",
)
@click.option("--acks", type=click.Choice(["all", "1", "0"]), default="all", show_default=True)
@click.option(
    "-z",
    "--compression",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@pass_context
def produce(
    ctx: Context, topic: str, fmt: str, key: str | None, headers: tuple[str, ...],
    partition: int | None, acks: str, compression: str,
) -> None:  # fmt: skip
    """Produce records to TOPIC, one per line of stdin."""
    pattern = input_pattern(parse_format(fmt, INPUT_FIELDS))
    fixed_headers = list(key_values(headers, "--header").items())
    producer = ctx.session.producer(**{
        "acks": acks, "compression.type": compression, "enable.idempotence": acks == "all",
        "partitioner": "murmur2_random",  # the Java client's: same key, same partition
        "message.timeout.ms": int(ctx.session.timeout * 1000),
    })  # fmt: skip
    failures: list[KafkaError] = []
    delivered: list[dict[str, Any]] = []

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            failures.append(error)
        else:
            delivered.append(
                {
                    "topic": message.topic(),
                    "partition": message.partition(),
                    "offset": message.offset(),
                }
            )

    count = 0
    with ctx.out.progress(f"producing to {topic}", None) as advance:
        for number, line in enumerate(sys.stdin, start=1):
            match = pattern.fullmatch(line[:-1] if line.endswith("\n") else line)
            if match is None:
                raise CliError(
                    f"input line {number} does not match the format {fmt!r}: {line.rstrip()!r}"
                )
            fields = match.groupdict()
            record_headers = list(fixed_headers)
            if fields.get("h"):
                record_headers += list(key_values(tuple(fields["h"].split(",")), "%h").items())
            target = int(fields["p"]) if fields.get("p") else partition
            kwargs: dict[str, Any] = {"value": (fields.get("v") or "").encode(),
                                      "headers": record_headers or None, "on_delivery": on_delivery}  # fmt: skip
            record_key = fields.get("k", key)
            if record_key is not None:
                kwargs["key"] = record_key.encode()
            if target is not None:
                kwargs["partition"] = target
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            count += 1
            advance()
            if failures:
                break
        remaining = producer.flush(ctx.session.timeout)
    if failures:
        raise describe_error(failures[0], f"producing to {topic}")
    if remaining:
        raise ctx.session.unreachable(f"{remaining} of {count} records not acknowledged")
    if ctx.out.json:
        ctx.out.data({"topic": topic, "produced": count, "records": delivered})
    else:
        ctx.out.note(f"produced {count} records to {topic}")


@click.command()
@click.argument("topics", nargs=-1, required=True)
@click.option(
    "-f",
    "--format-string",
    "fmt",
    default="%v\\n",
    show_default=True,
    help="How to print each record.",
)
@click.option(
    "-g",
    "--group",
    help="Consume as this group (committing offsets); default: no group, every partition.",
)
@click.option(
    "-o",
    "--offset",
    "start",
    default="start",
    show_default=True,
    metavar="start|end|OFFSET",
    help="Where to begin without a committed offset.",
)
@click.option("-n", "--num", type=click.IntRange(min=1), help="Stop after this many records.")
@click.option(
    "--idle",
    type=click.FloatRange(min=0),
    help="Stop after this many seconds without a record (default: wait for ever, or --timeout with -n unset in JSON mode).",
)
@pass_context
def consume(
    ctx: Context, topics: tuple[str, ...], fmt: str, group: str | None, start: str,
    num: int | None, idle: float | None,
) -> None:  # fmt: skip
    """Print the records of TOPICS."""
    parts = parse_format(fmt, OUTPUT_FIELDS)
    session = ctx.session
    reset = {"start": "earliest", "end": "latest"}.get(start)
    explicit: int | None = None
    if reset is None:
        try:
            explicit = int(start)
        except ValueError:
            raise click.BadParameter(
                f"expected start, end or an offset, got {start!r}", param_hint="--offset"
            ) from None
    consumer = session.consumer(**{
        "group.id": group or "strom-cli", "enable.auto.commit": bool(group),
        "auto.offset.reset": reset or "earliest", "enable.partition.eof": False,
    })  # fmt: skip
    try:
        if group:
            consumer.subscribe(list(topics))
        else:
            consumer.assign(list(_all_partitions(ctx, topics, explicit, reset)))
        seen = 0
        waited = 0.0
        with ctx.out.progress("consuming", num) as advance:
            while num is None or seen < num:
                message = consumer.poll(0.25)
                if message is None:
                    waited += 0.25
                    if idle is not None and waited >= idle:
                        break
                    continue
                error = message.error()
                if error is not None:
                    if error.fatal() or error.code() in (
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                        KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    ):
                        raise describe_error(error, "consuming")
                    continue
                waited = 0.0
                seen += 1
                _print(ctx, parts, message)
                advance()
    finally:
        consumer.close()
    if num is not None and seen < num:
        raise CliError(
            f"stopped after {seen} of {num} records (no record for {idle:g}s)", EXIT_FAILED
        )


def _all_partitions(
    ctx: Context, topics: tuple[str, ...], explicit: int | None, reset: str | None
) -> Iterator[TopicPartition]:
    metadata = ctx.session.metadata()
    for topic in topics:
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None:
            raise CliError(f"topic {topic}: UNKNOWN_TOPIC_OR_PART")
        for pid in sorted(meta.partitions):
            offset = (
                explicit
                if explicit is not None
                else (OFFSET_END if reset == "latest" else OFFSET_BEGINNING)
            )
            yield TopicPartition(topic, pid, offset)


def _print(ctx: Context, parts: list[str | tuple[str]], message: Any) -> None:
    record = {
        "topic": message.topic(), "partition": message.partition(), "offset": message.offset(),
        "timestamp": message.timestamp()[1], "key": _text(message.key()),
        "value": _text(message.value()),
        "headers": [(k, _text(v)) for k, v in (message.headers() or [])],
    }  # fmt: skip
    if ctx.out.json:
        record["headers"] = dict(record["headers"])
        ctx.out.data(record)
    else:
        sys.stdout.write(render(parts, record))
        sys.stdout.flush()
