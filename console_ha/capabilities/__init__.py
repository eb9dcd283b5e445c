"""The capabilities: one module each, the registry built from them, and the executor that runs them."""
