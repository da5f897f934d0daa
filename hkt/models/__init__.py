"""Models built from config: the encoder classifier used for every task."""

from hkt.models.encoder import (EncoderClassifier, EncoderConfig, build_model, model_for,
                                sinusoidal_table)

__all__ = ["EncoderClassifier", "EncoderConfig", "build_model", "model_for", "sinusoidal_table"]
