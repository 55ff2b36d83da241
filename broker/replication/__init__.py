"""This broker's partitions, kept in step with the metadata image.

`partitions` creates, deletes and reconfigures the local logs as the controller's image says.
Replication (followers fetching from leaders, the ISR, the high watermark, leader changes)
is the next issue's work and belongs here, beside it.
"""
