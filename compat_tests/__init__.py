"""Stock clients and tools against a real Strom broker process."""
