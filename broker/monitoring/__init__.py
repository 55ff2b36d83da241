"""`metrics.listener`: the broker's metrics for Prometheus, and its health checks, over HTTP.

- `families`: turns the recorder (`strom.broker.metrics`) and the broker's state into
  Prometheus metric families at scrape time, named as Strimzi's JMX-exporter rules name
  Kafka's MBeans.
- `health`: liveness and readiness.
- `endpoint`: the HTTP server on trio (`/metrics`, `/healthz`, `/readyz`).

prometheus_client and h11 are imported only here, and only the process start-up imports this
package, when `metrics.listener` is set.
"""
