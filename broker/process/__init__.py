"""The broker process: start-up and shutdown (`app`), the `strom` command line (`cli`),
logfmt logging (`logfmt`), and process-wide tuning (`limits`, `malloc`)."""
