"""`python -m compat_tests.kafka_python_suite`: run kafka-python's SASL and SSL integration tests."""

import sys

from compat_tests.kafka_python_suite.suite import main

sys.exit(main())
