"""Models built from config: the encoder classifier used for every task."""

from hkt.models.encoder import EncoderClassifier, build_model, sinusoidal_table

__all__ = ["EncoderClassifier", "build_model", "sinusoidal_table"]
