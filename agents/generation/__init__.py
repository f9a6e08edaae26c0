"""Generation back-ends: ``hf`` (transformers, CPU or one GPU) and ``vllm`` (GPU); see ``base``."""

from agents.generation.base import GenerationOutput, GenerationParams, Generator

__all__ = ["GenerationOutput", "GenerationParams", "Generator"]
