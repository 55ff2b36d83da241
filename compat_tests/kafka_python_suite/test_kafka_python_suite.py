"""kafka-python's own SASL and SSL integration tests, from its PyPI sdist, pass against Strom
(`compat_tests.kafka_python_suite.suite` says how they are pointed at it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests.kafka_python_suite.suite import SuiteUnavailable, run

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def test_kafka_pythons_sasl_and_ssl_integration_tests(tmp_path: Path) -> None:
    try:
        result = run(tmp_path)
    except SuiteUnavailable as missing:
        pytest.fail(str(missing), pytrace=False)
    summary = "\n".join(f"{o.status:8} {o.name}" for o in result.outcomes)
    not_passed = [o for o in result.outcomes if o.status != "passed"]
    assert result.outcomes, f"kafka-python's tests did not run:\n{result.output[-6000:]}"
    assert not not_passed, (
        f"{summary}\n\n" + "\n\n".join(f"{o.name}: {o.detail[-3000:]}" for o in not_passed)
    )
    assert result.code == 0, result.output[-6000:]
    names = [o.name for o in result.outcomes]
    sasl = [n for n in names if "test_sasl_integration" in n]
    ssl = [n for n in names if "test_ssl_integration" in n]
    for mechanism in MECHANISMS:  # every mechanism ran: none was skipped away
        assert any(f"[{mechanism}]" in n for n in sasl), summary
    assert len(sasl) >= 3 * len(MECHANISMS), summary
    assert len(ssl) >= 2, summary
    print(f"kafka-python suite: {len(sasl)} SASL and {len(ssl)} SSL integration tests passed")
