"""Queue orders registered in ``ORDERS`` (module name = order name)."""
