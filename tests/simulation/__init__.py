"""The deterministic simulation of the whole cluster: real brokers, controllers and clients in one
process, on trio's virtual clock and one seed, with a faulty network, disk and clocks
(docs/simulation.md)."""
