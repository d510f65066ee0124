"""torch.nn.functional's forms composed from the primitives: activations, losses, convolution, pooling,
resampling, and scaled dot-product attention with its fused CUSTOM kernels."""
