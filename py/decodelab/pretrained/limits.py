"""What a GGUF file must be for decodelab to read it, in one place that imports nothing: the
reader (gguf, model) holds files to it, and the page says it before a file is chosen
(webapi.pretrained.reads, at start-up, where importing the reader would cost time)."""

MAX_FILE_BYTES = 256 * 2**20  # the largest file decodelab reads (its float32 weights must fit
# a browser tab: a 256 MB Q4 file is about 1.5 GB of float32)
ARCHITECTURES = ("llama",)  # the model architectures decodelab runs (Llama's layers)
# the tensor types decodelab reads: (values per block, bytes per block)
BLOCKS = {"F32": (1, 4), "F16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q8_0": (32, 34)}

# The sampling a chat model starts from in the workbench: SmolLM2-135M-Instruct's model card runs
# it with do_sample=True, temperature=0.2, top_p=0.9 (Hugging Face's usage example for it). At
# the workbench's T = 1 with no filter it wanders off ("yellow, orange, and purple" for the
# primary colours); the trained models keep the workbench's own defaults.
RECOMMENDED = {"temperature": 0.2, "top_p": 0.9}
RECOMMENDED_FROM = "the sampling its model card runs it with"
