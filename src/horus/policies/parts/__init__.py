"""What policies are built from: the order x placement framework (``ordered``, ``compose``) and shared helpers."""
