"""The models and tokenizers as Hugging Face files: config and weights for transformers,
tokenizer.json, and the safetensors format."""
