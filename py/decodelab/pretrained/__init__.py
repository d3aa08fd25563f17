"""A pretrained model as a decodelab model: a GGUF file read with numpy (gguf), its own
byte-level BPE (tokenizer), its chat template (chat), its weights in the layout of core's
transformer (model), and where the file is found (files). It builds on core and nothing else.
"""
