"""limn.models: GPT-2 and LLaMA as limn modules, loaded from Hugging Face checkpoint folders, and generation.

model = limn.models.from_pretrained("path/to/gpt2")  # config.json + model.safetensors
tokens = limn.models.generate(model, [464, 3290], max_new_tokens=20)
"""

from limn.models.generation import generate
from limn.models.gpt2 import GPT2, GPT2Config
from limn.models.hub import LAYOUTS, from_pretrained
from limn.models.llama import Llama, LlamaConfig

__all__ = ["GPT2", "LAYOUTS", "GPT2Config", "Llama", "LlamaConfig", "from_pretrained", "generate"]
