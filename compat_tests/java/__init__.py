"""The stock Java Kafka client (kafka-clients, as Spark's Kafka source and sink use it)."""
