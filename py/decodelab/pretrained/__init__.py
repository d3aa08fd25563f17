"""A pretrained model as a decodelab model: a GGUF file read with numpy (gguf), its own
byte-level BPE (tokenizer), its chat template (chat), its weights in the layout of core's
transformer (model), and where the file is found (files). It builds on core and nothing else;
importing it registers its reader with core's library (`library.FILE_MODELS`).
"""

from decodelab.core.library import FILE_MODELS
from decodelab.fields import PRETRAINED
from decodelab.pretrained.files import read

FILE_MODELS[PRETRAINED[0]] = read
