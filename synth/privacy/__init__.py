"""Privacy layer: noise samplers and mechanisms, the accountant and composition, the RNG, the
noisy row count and parameter checks. Imports only ``synth.errors`` and ``synth._kernels``."""
