"""The catalogue of ops composed from the 19 primitives, one module per family: math, movement, indexed,
reduce, random and torch.nn.functional's functional forms. A backend implements the primitives and gets all of these."""
