"""Tiny configs of the causal presets for the CPU decode tests: preset config fields that shrink gpt2 and
tinyllama-1.1b (grouped-query attention kept) to 2 layers of width 128; ``initializer_range`` 0.2 spreads the
random logits so that greedy tokens vary."""

TINY_CAUSAL = {
    "gpt2": dict(n_layer=2, n_embd=128, n_head=4, initializer_range=0.2),
    "tinyllama-1.1b": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
                           intermediate_size=256, initializer_range=0.2),
}
